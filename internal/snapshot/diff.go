package snapshot

import (
	"bytes"
	"context"
	"strconv"
	"strings"
)

// FileDiff is how one file differs between two snapshots, in opencode's
// SnapshotFileDiff shape.
type FileDiff struct {
	File      string `json:"file"`
	Patch     string `json:"patch"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"`
}

// Diff statuses.
const (
	Added    = "added"
	Deleted  = "deleted"
	Modified = "modified"
)

// maxPatch bounds the patch text of one file in a diff; the counts stay
// exact.
const maxPatch = 256 << 10

// Changed lists the files that differ between two snapshots.
func (s *Store) Changed(ctx context.Context, dir, from, to string) ([]string, error) {
	if from == to {
		return nil, nil
	}
	w, err := s.workspace(dir)
	if err != nil {
		return nil, err
	}
	w.ops.Lock()
	defer w.ops.Unlock()
	if err := s.init(ctx, w); err != nil {
		return nil, err
	}
	out, err := s.run(ctx, w, nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files, nil
}

// Diff describes, file by file, how snapshot to differs from snapshot
// from.
func (s *Store) Diff(ctx context.Context, dir, from, to string) ([]FileDiff, error) {
	if from == "" || to == "" || from == to {
		return []FileDiff{}, nil
	}
	w, err := s.workspace(dir)
	if err != nil {
		return nil, err
	}
	w.ops.Lock()
	defer w.ops.Unlock()
	if err := s.init(ctx, w); err != nil {
		return nil, err
	}
	out, err := s.run(ctx, w, nil, "diff-tree", "-r", "-p", "--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/", from, to)
	if err != nil {
		return nil, err
	}
	return parsePatch(out), nil
}

// parsePatch splits git's unified diff into files, counting added and
// removed lines.
func parsePatch(out []byte) []FileDiff {
	diffs := []FileDiff{}
	var cur *FileDiff
	var patch strings.Builder
	end := func() {
		if cur == nil {
			return
		}
		cur.Patch = patch.String()
		if len(cur.Patch) > maxPatch {
			cur.Patch = cur.Patch[:maxPatch] + "\n… (patch cut)\n"
		}
		diffs = append(diffs, *cur)
		cur = nil
		patch.Reset()
	}
	inHunk := false
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "diff --git ") {
			end()
			cur = &FileDiff{Status: Modified, File: pathFromHeader(line)}
			inHunk = false
		}
		if cur == nil {
			continue
		}
		if patch.Len() <= maxPatch {
			patch.WriteString(line)
		}
		switch {
		case strings.HasPrefix(line, "@@"):
			inHunk = true
		case !inHunk && strings.HasPrefix(line, "new file mode"):
			cur.Status = Added
		case !inHunk && strings.HasPrefix(line, "deleted file mode"):
			cur.Status = Deleted
		case !inHunk && strings.HasPrefix(line, "+++ ") && !strings.HasPrefix(line, "+++ /dev/null"):
			cur.File = unquote(strings.TrimSuffix(strings.TrimPrefix(line, "+++ "), "\n"), "b/")
		case !inHunk && strings.HasPrefix(line, "--- ") && !strings.HasPrefix(line, "--- /dev/null") && cur.Status == Deleted:
			cur.File = unquote(strings.TrimSuffix(strings.TrimPrefix(line, "--- "), "\n"), "a/")
		case inHunk && strings.HasPrefix(line, "+"):
			cur.Additions++
		case inHunk && strings.HasPrefix(line, "-"):
			cur.Deletions++
		}
	}
	end()
	return diffs
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
