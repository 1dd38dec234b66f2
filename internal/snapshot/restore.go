package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentd/agentd/internal/safegit"
)

// A restore puts files back as snapshots had them. It is decided whole
// before anything is touched (Plan), then carried out (Apply), and every
// change it makes can be undone from the snapshot of the present the plan
// names (Apply with back): the caller journals the plan, so that a crash
// at any point is finished or rolled back from the journal. It never runs
// git per file: one ls-tree per snapshot involved and one cat-file per
// batch of blobs, the files written by agentd through the workspace's
// root (so never out of it) without the store's index.

// Source names a file to restore and the snapshot to restore it from.
type Source struct {
	Path string
	Tree string
}

// Entry is a file as a snapshot holds it, by its git mode and blob; the
// zero Entry is a file the snapshot does not hold (restoring it deletes
// the file).
type Entry struct {
	Mode string `json:"mode,omitempty"`
	Blob string `json:"blob,omitempty"`
	// Size is the blob's, which bounds the batches it is read in.
	Size int64 `json:"size,omitempty"`
}

// Step is one change of a restore: Path becomes To (as snapshot Tree has
// it), and Back undoes the change (Path as the snapshot of the present
// has it).
type Step struct {
	Path string `json:"path"`
	Tree string `json:"tree"`
	To   Entry  `json:"to"`
	Back Entry  `json:"back"`
}

// Kept is a file a restore leaves as it is, and why.
type Kept struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Plan is a restore decided before it is made: the snapshot of the present
// that rolls it back, the changes, and the files it leaves alone.
type Plan struct {
	Present string `json:"present"`
	Steps   []Step `json:"steps,omitempty"`
	Kept    []Kept `json:"kept,omitempty"`
}

// Reasons a restore leaves a file as it is.
const (
	// KeptUntracked: the snapshot of the present did not hold the file
	// (ignored, or over the size limit), so changing it could not be
	// undone, nor could the snapshots tell that a step made it.
	KeptUntracked = "not in the snapshot taken before the revert (ignored or over the size limit): left as it is"
	// KeptIgnored: the file is absent from the snapshot it would be
	// restored from, which ignored it: it may have existed then.
	KeptIgnored = "ignored when its snapshot was taken, so the snapshot cannot tell whether it existed: left as it is"
	// KeptSubmodule: a nested repository is not restored.
	KeptSubmodule = "a nested git repository: left as it is"
)

// RefusedError is a restore that cannot be made as asked: a path that is
// not inside the workspace, one that leads through a symbolic link or a
// file, or a directory in the place of a file that holds files the
// snapshots did not take. Nothing was changed.
type RefusedError struct {
	Path   string
	Reason string
}

func (e *RefusedError) Error() string { return "cannot restore " + e.Path + ": " + e.Reason }

// Plan decides how to put the files of want back as their snapshots had
// them, present being a snapshot of the workspace taken just before. A
// file the snapshot of the present did not hold is left as it is (it is
// reported in Kept): overwriting or deleting it could not be undone. A
// file absent from its snapshot is deleted only when that snapshot's
// ignore rules would have taken it. Nothing is changed.
func (s *Store) Plan(ctx context.Context, dir string, want []Source, present string) (Plan, error) {
	p := Plan{Present: present}
	if len(want) == 0 {
		return p, nil
	}
	w, err := s.workspace(dir)
	if err != nil {
		return p, err
	}
	w.ops.Lock()
	defer w.ops.Unlock()
	if err := s.init(ctx, w); err != nil {
		return p, err
	}
	pl := planner{s: s, w: w, ctx: ctx, trees: map[string]map[string]Entry{}}
	if err := pl.list(want, present); err != nil {
		return p, err
	}
	root, err := os.OpenRoot(w.dir)
	if err != nil {
		return p, err
	}
	defer root.Close()
	pl.root = root
	if err := pl.decide(want, present); err != nil {
		return p, err
	}
	if err := pl.keepIgnored(); err != nil {
		return p, err
	}
	if err := pl.check(); err != nil {
		return p, err
	}
	sort.Slice(pl.steps, func(i, j int) bool { return pl.steps[i].Path < pl.steps[j].Path })
	p.Steps, p.Kept = pl.steps, pl.kept
	return p, nil
}

// planner holds what Plan has read and decided.
type planner struct {
	s     *Store
	w     *workspace
	ctx   context.Context
	root  *os.Root
	trees map[string]map[string]Entry
	steps []Step
	kept  []Kept
	// doubtful are the deletions to check against the ignore rules of
	// the snapshot each file is restored from.
	doubtful map[string][]string
}

// list reads the entries of every snapshot involved that matter: the
// files asked, and each snapshot's .gitignore files.
func (pl *planner) list(want []Source, present string) error {
	asked := map[string]map[string]bool{present: {}}
	for _, f := range want {
		if !filepath.IsLocal(f.Path) || filepath.Clean(f.Path) != f.Path || strings.Contains(f.Path, "\\") {
			return &RefusedError{Path: f.Path, Reason: "not a path inside the workspace"}
		}
		if asked[f.Tree] == nil {
			asked[f.Tree] = map[string]bool{}
		}
		asked[f.Tree][f.Path] = true
		asked[present][f.Path] = true
	}
	for tree, paths := range asked {
		files, err := pl.s.listTree(pl.ctx, pl.w, tree, func(p string) bool { return paths[p] || path.Base(p) == ".gitignore" })
		if err != nil {
			return err
		}
		pl.trees[tree] = files
	}
	return nil
}

// decide turns each file asked into a step, a kept file or nothing (a
// file absent from both its snapshot and the workspace).
func (pl *planner) decide(want []Source, present string) error {
	seen := map[string]bool{}
	pl.doubtful = map[string][]string{}
	for _, f := range want {
		if seen[f.Path] {
			continue
		}
		seen[f.Path] = true
		to, inSource := pl.trees[f.Tree][f.Path]
		back, inPresent := pl.trees[present][f.Path]
		// A directory in the file's place is checked later (checkPlace).
		fi, err := pl.root.Lstat(f.Path)
		onDisk := err == nil && !fi.IsDir()
		switch {
		case inSource && to.Mode == modeGitlnk || inPresent && back.Mode == modeGitlnk:
			pl.keep(f.Path, KeptSubmodule)
		case onDisk && (!inPresent || fi.Size() != back.Size):
			// Not in the snapshot of the present, or not as it is now
			// (a file grown over the size limit keeps its last
			// snapshotted version there).
			pl.keep(f.Path, KeptUntracked)
		case inSource:
			pl.steps = append(pl.steps, Step{Path: f.Path, Tree: f.Tree, To: to, Back: back})
		case inPresent:
			// Absent from its snapshot: deleted once its ignore rules
			// are known to have taken it then.
			pl.doubtful[f.Tree] = append(pl.doubtful[f.Tree], f.Path)
			pl.steps = append(pl.steps, Step{Path: f.Path, Tree: f.Tree, Back: back})
		}
	}
	return nil
}

func (pl *planner) keep(p, reason string) { pl.kept = append(pl.kept, Kept{Path: p, Reason: reason}) }

// check refuses a plan whose writes would go through a symbolic link or a
// file left in place, or replace a directory holding files the plan does
// not delete.
func (pl *planner) check() error {
	deleting := map[string]bool{}
	for _, st := range pl.steps {
		if st.To.Blob == "" {
			deleting[st.Path] = true
		}
	}
	for _, st := range pl.steps {
		if err := pl.checkWay(st.Path, deleting); err != nil {
			return err
		}
		if st.To.Blob == "" {
			continue
		}
		if err := pl.checkPlace(st.Path, deleting); err != nil {
			return err
		}
	}
	return nil
}

// checkWay refuses a path whose leading components are not directories
// (a symbolic link, a file), unless the plan deletes that component first.
func (pl *planner) checkWay(p string, deleting map[string]bool) error {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		lead := strings.Join(parts[:i], "/")
		fi, err := pl.root.Lstat(lead)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return &RefusedError{Path: p, Reason: err.Error()}
		case fi.IsDir():
			continue
		case deleting[lead]:
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			return &RefusedError{Path: p, Reason: lead + " is a symbolic link; move it away and retry"}
		default:
			return &RefusedError{Path: p, Reason: lead + " is not a directory"}
		}
	}
	return nil
}

// maxInPlace bounds the walk of a directory found where a file is to be
// written.
const maxInPlace = 10_000

// checkPlace refuses a file to write where a directory stands that holds
// anything the plan does not delete.
func (pl *planner) checkPlace(p string, deleting map[string]bool) error {
	fi, err := pl.root.Lstat(p)
	if err != nil || !fi.IsDir() {
		return nil
	}
	n := 0
	return fs.WalkDir(pl.root.FS(), p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return &RefusedError{Path: p, Reason: err.Error()}
		}
		if n++; n > maxInPlace {
			return &RefusedError{Path: p, Reason: "a large directory is in its place"}
		}
		if !d.IsDir() && !deleting[q] {
			return &RefusedError{Path: p, Reason: "a directory is in its place, holding " + q + ", which the snapshots did not take"}
		}
		return nil
	})
}

// keepIgnored keeps, of the files absent from their snapshot, those that
// snapshot's ignore rules leave out: it would not have held them even if
// they existed then (a .gitignore the step rewrote can make a user's
// ignored file look created by the step).
func (pl *planner) keepIgnored() error {
	ignored := map[string]bool{}
	for tree, paths := range pl.doubtful {
		got, err := pl.ignoredBy(tree, paths)
		if err != nil {
			return err
		}
		for _, p := range got {
			ignored[p] = true
		}
	}
	if len(ignored) == 0 {
		return nil
	}
	steps := pl.steps[:0]
	for _, st := range pl.steps {
		if st.To.Blob == "" && ignored[st.Path] {
			pl.keep(st.Path, KeptIgnored)
			continue
		}
		steps = append(steps, st)
	}
	pl.steps = steps
	return nil
}

// ignoredBy lists those of paths that the ignore rules of snapshot tree
// exclude: its .gitignore files, written into a scratch work tree, and
// the store's own excludes, asked of git check-ignore.
func (pl *planner) ignoredBy(tree string, paths []string) ([]string, error) {
	var rules []Entry
	var names []string
	for p, e := range pl.trees[tree] {
		if path.Base(p) == ".gitignore" && filepath.IsLocal(p) && (e.Mode == modeFile || e.Mode == modeExec) {
			rules = append(rules, e)
			names = append(names, p)
		}
	}
	if len(rules) == 0 {
		return nil, nil
	}
	scratch, err := os.MkdirTemp("", "agentd-ignore-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	err = pl.s.blobs(pl.ctx, pl.w, rules, func(i int, data []byte) error {
		f := filepath.Join(scratch, filepath.FromSlash(names[i]))
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return err
		}
		return os.WriteFile(f, data, 0o600)
	})
	if err != nil {
		return nil, err
	}
	return pl.s.checkIgnore(pl.ctx, pl.w, scratch, paths)
}

// checkIgnore lists those of paths the ignore rules of the work tree wt
// exclude.
func (s *Store) checkIgnore(ctx context.Context, w *workspace, wt string, paths []string) ([]string, error) {
	var in []byte
	for _, p := range paths {
		in = append(in, p...)
		in = append(in, 0)
	}
	c := s.cmd(w, "check-ignore", "--no-index", "-z", "--stdin")
	c.WorkTree, c.Stdin = wt, bytes.NewReader(in)
	out, err := safegit.Output(ctx, c)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return nil, nil // none is ignored
	}
	if err != nil {
		return nil, fmt.Errorf("check ignore rules: %w", err)
	}
	var got []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p != "" {
			got = append(got, p)
		}
	}
	return got, nil
}

// Restore puts files back as snapshot tree had them, all or nothing: it
// snapshots the present, plans, applies, and rolls back what it applied
// when it fails. Files the snapshots did not take are left as they are.
// Callers that must survive a crash journal the plan instead (Plan,
// Apply).
func (s *Store) Restore(ctx context.Context, dir, tree string, files []string) (Plan, error) {
	if len(files) == 0 {
		return Plan{}, nil
	}
	present, err := s.Track(ctx, dir)
	if err != nil {
		return Plan{}, err
	}
	want := make([]Source, len(files))
	for i, f := range files {
		want[i] = Source{Path: f, Tree: tree}
	}
	p, err := s.Plan(ctx, dir, want, present)
	if err != nil {
		return p, err
	}
	if err := s.Apply(ctx, dir, p, false, nil); err != nil {
		if rerr := s.Apply(context.WithoutCancel(ctx), dir, p, true, nil); rerr != nil {
			return p, fmt.Errorf("%w (and rolling back: %v)", err, rerr)
		}
		return p, err
	}
	return p, nil
}
