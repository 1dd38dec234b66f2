package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/safegit"
)

// FileDiff is how one file differs between two snapshots, in opencode's
// SnapshotFileDiff shape.
type FileDiff struct {
	File      string `json:"file"`
	Patch     string `json:"patch"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"`
	// Cut is set when the patch was cut short by the diff's bounds (the
	// counts stay exact).
	Cut bool `json:"-"`
}

// Diff statuses.
const (
	Added    = "added"
	Deleted  = "deleted"
	Modified = "modified"
)

// maxPatch bounds the patch text of one file in a diff, and maxDiff that
// of a whole diff (files past it come with an empty patch and a note);
// the counts stay exact.
const (
	maxPatch = 256 << 10
	maxDiff  = 4 << 20
)

// The notes that end a patch cut short.
const (
	cutNote  = "\n… (patch cut)\n"
	fullNote = "… (patch left out: this diff's patches reached their bound)\n"
)

// ErrGone is returned for a snapshot the store no longer holds.
var ErrGone = errors.New("the snapshot is no longer in the store (older than the retention, or taken before snapshots moved out of the workspace)")

// Changed lists the files that differ between two snapshots.
func (s *Store) Changed(ctx context.Context, dir, from, to string) ([]string, error) {
	if from == to {
		return nil, nil
	}
	w, err := s.ready(ctx, dir)
	if err != nil {
		return nil, err
	}
	out, err := s.run(ctx, w, nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to)
	if err != nil {
		return nil, s.gone(ctx, w, err, from, to)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files, nil
}

// ready is the workspace's store, checked. Reading snapshots (diff-tree)
// reads only objects, so it runs outside ops: a slow reader of a diff
// holds no snapshot up.
func (s *Store) ready(ctx context.Context, dir string) (*workspace, error) {
	w, err := s.workspace(dir)
	if err != nil {
		return nil, err
	}
	w.ops.Lock()
	defer w.ops.Unlock()
	return w, s.init(ctx, w)
}

// gone turns the failure of a command that read snapshots into ErrGone
// when one of them is missing from the store.
func (s *Store) gone(ctx context.Context, w *workspace, err error, hashes ...string) error {
	for _, h := range hashes {
		if _, cerr := s.run(ctx, w, nil, "cat-file", "-e", h); cerr != nil && ctx.Err() == nil {
			return fmt.Errorf("snapshot %s: %w", h, ErrGone)
		}
	}
	return err
}

// Diff describes, file by file, how snapshot to differs from snapshot
// from (see DiffEach).
func (s *Store) Diff(ctx context.Context, dir, from, to string) ([]FileDiff, error) {
	out := []FileDiff{}
	err := s.DiffEach(ctx, dir, from, to, func(d FileDiff) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// DiffEach calls fn with each file that differs between snapshots from
// and to, in git's order, as git writes the diff: one file's patch is
// held at a time, each is cut at 256 KiB and all of them together at 4
// MiB (the counts stay exact). An error of fn stops the diff and is
// returned.
func (s *Store) DiffEach(ctx context.Context, dir, from, to string, fn func(FileDiff) error) error {
	if from == "" || to == "" || from == to {
		return nil
	}
	w, err := s.ready(ctx, dir)
	if err != nil {
		return err
	}
	c := s.cmd(w, "diff-tree", "-r", "-p", "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames",
		"--src-prefix=a/", "--dst-prefix=b/", from, to)
	return StreamPatch(ctx, c, "git diff-tree", DefaultLimits, fn, func(err error) error {
		return s.gone(ctx, w, err, from, to)
	})
}

// StreamPatch runs c, a git command that writes a unified diff (what
// names it in an error of its start), and hands each file to fn as
// ParsePatch does with lim. An error of the reading or of fn is
// returned; git's own failure (safegit.Failure), once all was read, goes
// through failed when it is not nil.
func StreamPatch(ctx context.Context, c safegit.Cmd, what string, lim Limits, fn func(FileDiff) error, failed func(error) error) error {
	gitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd, err := safegit.Command(gitCtx, c)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = safegit.Stderr(&stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	perr := ParsePatch(stdout, lim, fn)
	if perr != nil {
		cancel() // nothing more is read: git must not wait on the pipe
	}
	werr := cmd.Wait()
	if perr != nil {
		return perr
	}
	if werr == nil {
		return nil
	}
	err = safegit.Failure(c.Args, werr, stderr.Bytes())
	if failed != nil {
		err = failed(err)
	}
	return err
}

// patchParser splits git's unified diff into files as it reads it,
// counting added and removed lines.
type patchParser struct {
	fn     func(FileDiff) error
	cur    *FileDiff
	patch  []byte
	cut    bool
	inHunk bool
	// file bounds one file's patch; left is what the whole diff's
	// patches may still hold.
	file, left int
}

// Limits bound the patch text a parse keeps: of one file, and of all of
// them together. Files past them come with their patch cut (Cut set) and
// a note; the counts stay exact.
type Limits struct {
	File, Total int
}

// DefaultLimits are the bounds of a snapshot diff: 256 KiB of patch per
// file, 4 MiB per diff.
var DefaultLimits = Limits{File: maxPatch, Total: maxDiff}

// parsePatch is ParsePatch with the default limits.
func parsePatch(r io.Reader, fn func(FileDiff) error) error {
	return ParsePatch(r, DefaultLimits, fn)
}

// ParsePatch reads a unified diff as git writes it (diff --git headers)
// from r, line by line (a line longer than the reader's buffer comes in
// pieces, of which only the first is looked at), and calls fn with each
// file: its path, status, added and removed lines, and its patch within
// lim. An error of fn stops the parse and is returned.
func ParsePatch(r io.Reader, lim Limits, fn func(FileDiff) error) error {
	p := &patchParser{fn: fn, file: lim.File, left: lim.Total}
	br := bufio.NewReaderSize(r, 64<<10)
	start := true
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) > 0 {
			if start {
				if ferr := p.line(frag); ferr != nil {
					return ferr
				}
			} else {
				p.add(frag)
			}
		}
		start = !errors.Is(err, bufio.ErrBufferFull)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && start {
			return err
		}
	}
	return p.end()
}

var (
	diffHeader = []byte("diff --git ")
	hunkHeader = []byte("@@")
	newFile    = []byte("new file mode")
	deleted    = []byte("deleted file mode")
	plusPath   = []byte("+++ ")
	minusPath  = []byte("--- ")
	devNull    = []byte("/dev/null")
)

// line takes the start of one line of the diff.
func (p *patchParser) line(l []byte) error {
	if bytes.HasPrefix(l, diffHeader) {
		if err := p.end(); err != nil {
			return err
		}
		p.cur = &FileDiff{Status: Modified, File: pathFromHeader(string(l))}
		p.inHunk = false
	}
	if p.cur == nil {
		return nil
	}
	p.add(l)
	switch {
	case bytes.HasPrefix(l, hunkHeader):
		p.inHunk = true
	case p.inHunk && l[0] == '+':
		p.cur.Additions++
	case p.inHunk && l[0] == '-':
		p.cur.Deletions++
	case p.inHunk:
	case bytes.HasPrefix(l, newFile):
		p.cur.Status = Added
	case bytes.HasPrefix(l, deleted):
		p.cur.Status = Deleted
	case bytes.HasPrefix(l, plusPath) && !bytes.HasPrefix(l[4:], devNull):
		p.cur.File = headerPath(string(l[4:]), "b/")
	case bytes.HasPrefix(l, minusPath) && !bytes.HasPrefix(l[4:], devNull) && p.cur.Status == Deleted:
		p.cur.File = headerPath(string(l[4:]), "a/")
	}
	return nil
}

// add appends b to the current file's patch, as far as the bounds allow.
func (p *patchParser) add(b []byte) {
	if p.cur == nil || p.cut {
		return
	}
	room := min(p.file, p.left) - len(p.patch)
	if len(b) > room {
		p.patch = append(p.patch, b[:max(room, 0)]...)
		p.cut = true
		return
	}
	p.patch = append(p.patch, b...)
}

// end hands the current file to fn.
func (p *patchParser) end() error {
	if p.cur == nil {
		return nil
	}
	d := *p.cur
	d.Cut = p.cut
	switch {
	case p.cut && len(p.patch) == 0:
		d.Patch = fullNote
	case p.cut && len(p.patch) >= p.left:
		d.Patch = string(p.patch) + "\n" + fullNote
	case p.cut:
		d.Patch = string(p.patch) + cutNote
	default:
		d.Patch = string(p.patch)
	}
	p.left -= len(p.patch)
	p.cur, p.patch, p.cut = nil, p.patch[:0], false
	return p.fn(d)
}

// pathFromHeader reads the path of "diff --git a/x b/x" (exact for paths
// without " b/"; the ---/+++ lines correct it for text files).
func pathFromHeader(line string) string {
	rest := strings.TrimSuffix(strings.TrimPrefix(line, "diff --git "), "\n")
	if strings.HasPrefix(rest, `"`) {
		if i := strings.Index(rest, `" "b/`); i >= 0 {
			return unquote(rest[:i+1], "a/")
		}
	}
	if i := strings.Index(rest, " b/"); i >= 0 {
		return unquote(rest[:i], "a/")
	}
	return rest
}

// headerPath reads the path of a ---/+++ line (after its marker): git
// ends it with a tab when it holds a space, for patch(1)'s sake.
func headerPath(p, prefix string) string {
	p = strings.TrimSuffix(p, "\n")
	if !strings.HasPrefix(p, `"`) {
		p = strings.TrimSuffix(p, "\t")
	}
	return unquote(p, prefix)
}

// unquote reads a path of git's diff headers: C-style quoted when it has
// special characters, and starting with prefix (a/ or b/).
func unquote(p, prefix string) string {
	if len(p) >= 2 && p[0] == '"' {
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		}
	}
	return strings.TrimPrefix(p, prefix)
}
