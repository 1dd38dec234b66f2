package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/vcs"
)

// The project's own git, as opencode's /vcs routes show it: what the work
// tree changed against HEAD (mode git) or against where the branch left
// the default branch (mode branch), file by file with patches, and the
// raw patch of it. Every git here runs through safegit.Project: the
// repository's configuration and attributes file are never read.

// Diff modes of VcsDiff.
const (
	ModeGit    = "git"
	ModeBranch = "branch"
)

// Bounds of a diff of the project: its time, and the new files whose
// patches and counts it reads (past them, new files are listed without).
const (
	vcsTimeout   = 30 * time.Second
	maxNewFiles  = 1000
	fullContext  = 1<<31 - 1
	defaultRawUn = 3
)

// ErrNotRepo is returned by VcsApply for a directory in no git repository
// agentd can read.
var ErrNotRepo = errors.New("not in a git repository")

// DiffOptions are a diff's mode, its lines of context around each change
// (negative: the whole file, as opencode's default), and hidden, which
// leaves out the files (relative to the directory) a caller must not
// show.
type DiffOptions struct {
	Mode    string
	Context int
	Hidden  func(rel string) bool
	// Limits bound the patches kept (default snapshot.DefaultLimits).
	Limits snapshot.Limits
}

// project is a directory's repository opened for reading.
type project struct {
	repo *safegit.Repo
	dir  string
}

// openProject opens the repository holding dir; ok is false outside one,
// or without git.
func openProject(ctx context.Context, dir string) (*project, bool, error) {
	root, ok := vcs.Root(dir)
	if !ok || !safegit.Available() {
		return nil, false, nil
	}
	repo, err := safegit.Project(ctx, root)
	if errors.Is(err, safegit.ErrNoRepo) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &project{repo: repo, dir: dir}, true, nil
}

func (p *project) close() { p.repo.Close() }

func (p *project) output(ctx context.Context, args ...string) ([]byte, error) {
	return safegit.Output(ctx, p.repo.Cmd(p.dir, args...))
}

// rel turns a path git names from the repository's root into one
// relative to the directory.
func (p *project) rel(file string) string {
	r, err := filepath.Rel(p.dir, filepath.Join(p.repo.Root, file))
	if err != nil {
		return file
	}
	return filepath.ToSlash(r)
}

// hasHead reports whether the repository has a commit checked out.
func (p *project) hasHead(ctx context.Context) bool {
	_, err := p.output(ctx, "rev-parse", "--verify", "-q", "HEAD")
	return err == nil
}

// VcsDiff is what the directory's files changed, in the repository holding
// it, file by file in opencode's VcsFileDiff shape, sorted by path (paths
// from the repository's root, as git names them): empty outside a
// repository or without git.
func VcsDiff(ctx context.Context, dir string, o DiffOptions) ([]snapshot.FileDiff, error) {
	out := []snapshot.FileDiff{}
	ctx, cancel := context.WithTimeout(ctx, vcsTimeout)
	defer cancel()
	p, ok, err := openProject(ctx, dir)
	if err != nil || !ok {
		return out, err
	}
	defer p.close()
	if o.Limits == (snapshot.Limits{}) {
		o.Limits = snapshot.DefaultLimits
	}
	unified := fmt.Sprintf("--unified=%d", fullContext)
	if o.Context >= 0 {
		unified = fmt.Sprintf("--unified=%d", min(o.Context, fullContext))
	}
	ref := ""
	switch {
	case o.Mode == ModeBranch:
		if ref, ok = p.branchBase(ctx); !ok {
			return out, nil
		}
	case p.hasHead(ctx):
		ref = "HEAD"
	}
	keep := func(d snapshot.FileDiff) error {
		if o.Hidden == nil || !o.Hidden(p.rel(d.File)) {
			out = append(out, d)
		}
		return nil
	}
	seen := map[string]bool{}
	if ref != "" {
		err := p.parse(ctx, nil, o.Limits, keep, "diff", "--patch", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
			"--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/", unified, ref, "--", ".")
		if err != nil {
			return nil, err
		}
		for _, d := range out {
			seen[d.File] = true
		}
	}
	if err := p.newFiles(ctx, ref == "", seen, o, unified, keep); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

// newFiles adds the files git does not track yet (with no commit, every
// file in the index too) as added, their patches from a private index
// where each is only intended to be added: git reads them as it would on
// `git add`, and the project's index is left alone.
func (p *project) newFiles(ctx context.Context, all bool, seen map[string]bool, o DiffOptions, unified string, keep func(snapshot.FileDiff) error) error {
	stat, err := p.output(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all", "--", ".")
	if err != nil {
		return nil // not a repository git can read: nothing to report
	}
	var files []string
	for _, rec := range bytes.Split(stat, []byte{0}) {
		if len(rec) < 4 {
			continue
		}
		code, file := string(rec[:2]), string(rec[3:])
		if seen[file] || (code != "??" && !(all && strings.Contains(code, "A"))) {
			continue
		}
		if o.Hidden != nil && o.Hidden(p.rel(file)) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(p.repo.Root, file)); err == nil {
			files = append(files, file)
		}
	}
	sort.Strings(files)
	if len(files) > maxNewFiles {
		for _, f := range files[maxNewFiles:] {
			_ = keep(snapshot.FileDiff{File: f, Status: snapshot.Added, Cut: true})
		}
		files = files[:maxNewFiles]
	}
	if len(files) == 0 {
		return nil
	}
	tmp, err := os.MkdirTemp("", "agentd-vcs-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The empty blob an intent to add records is written to a private
	// object directory: the project's is only read.
	priv := privateIndex{index: filepath.Join(tmp, "index"), objects: filepath.Join(tmp, "objects")}
	if err := os.Mkdir(priv.objects, 0o700); err != nil {
		return err
	}
	var spec bytes.Buffer
	for _, f := range files {
		spec.WriteString(":(top,literal)" + f + "\x00")
	}
	add := priv.cmd(p.repo.Cmd(p.dir, "add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul"))
	add.Stdin = &spec
	if _, err := safegit.Output(ctx, add); err != nil {
		return err
	}
	return p.parse(ctx, &priv, o.Limits, keep, "diff", "--patch", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
		"--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/", unified, "--", ".")
}

// privateIndex is an index and an object directory of agentd's own, the
// project's objects read through it.
type privateIndex struct {
	index, objects string
}

func (x *privateIndex) cmd(c safegit.Cmd) safegit.Cmd {
	c.IndexFile, c.Alternates, c.ObjectDir = x.index, c.ObjectDir, x.objects
	return c
}

// parse runs a git diff (against priv's index, when set, instead of the
// project's) and hands each file to fn.
func (p *project) parse(ctx context.Context, priv *privateIndex, lim snapshot.Limits, fn func(snapshot.FileDiff) error, args ...string) error {
	c := p.repo.Cmd(p.dir, args...)
	if priv != nil {
		c = priv.cmd(c)
	}
	return snapshot.StreamPatch(ctx, c, "git diff", lim, fn, nil)
}

// branchBase is where the checked-out branch left the default branch:
// their merge base. ok is false on the default branch itself, or when
// there is no default branch to compare with.
func (p *project) branchBase(ctx context.Context) (string, bool) {
	name, ref := vcs.DefaultBranch(p.repo.Root)
	if ref == "" || vcs.Branch(p.repo.Root) == name {
		return "", false
	}
	out, err := p.output(ctx, "merge-base", ref, "HEAD")
	base := strings.TrimSpace(string(out))
	return base, err == nil && base != ""
}

// ErrDiffTooLarge is returned by VcsRaw for a diff whose patch is over its
// bound: a raw patch cut short could not be applied.
var ErrDiffTooLarge = errors.New("the working tree's patch is larger than 16 MiB")

// rawLimits bound the raw patch.
var rawLimits = snapshot.Limits{File: 16 << 20, Total: 16 << 20}

// VcsRaw is the raw patch of the directory's uncommitted changes (new
// files included), with three lines of context, as `git apply` takes it;
// hidden leaves files out.
func VcsRaw(ctx context.Context, dir string, hidden func(rel string) bool) (string, error) {
	diffs, err := VcsDiff(ctx, dir, DiffOptions{Mode: ModeGit, Context: defaultRawUn, Hidden: hidden, Limits: rawLimits})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, d := range diffs {
		if d.Cut {
			return "", ErrDiffTooLarge
		}
		b.WriteString(d.Patch)
	}
	return b.String(), nil
}
