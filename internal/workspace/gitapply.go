package workspace

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/safegit"
)

// Bounds of a patch VcsApply takes: its size and the files it names.
const (
	MaxApplyBytes = 8 << 20
	maxApplyFiles = 1000
)

// ApplyError is a patch that was not applied, in opencode's terms: Reason
// "non-git" (the directory is in no repository) or "not-clean" (git could
// not apply it; nothing was changed).
type ApplyError struct {
	Reason, Message string
}

func (e *ApplyError) Error() string { return e.Message }

// DeniedError is a patch that names a file the caller's rules deny to
// change; nothing was applied.
type DeniedError struct {
	Path string
}

func (e *DeniedError) Error() string {
	return "changing " + e.Path + " is denied by the operator's rules"
}

// ErrPatchTooLarge is a patch over MaxApplyBytes, or one naming more than
// maxApplyFiles files.
var ErrPatchTooLarge = fmt.Errorf("the patch is over %d bytes or names more than %d files", MaxApplyBytes, maxApplyFiles)

// VcsApply applies patch to the work tree of the repository holding dir,
// as `git apply` run there does: all of it or nothing, only to files under
// dir, never beyond a symbolic link or into .git. denied judges each file
// the patch names (its old and new names, relative to dir) before
// anything is written; one denied refuses the whole patch.
func VcsApply(ctx context.Context, dir, patch string, denied func(rel string) bool) error {
	if len(patch) > MaxApplyBytes {
		return ErrPatchTooLarge
	}
	ctx, cancel := context.WithTimeout(ctx, vcsTimeout)
	defer cancel()
	p, ok, err := openProject(ctx, dir)
	if err != nil {
		return err
	}
	if !ok {
		return &ApplyError{Reason: "non-git", Message: "Patch can't be applied because the project is not git-based"}
	}
	defer p.close()
	files := patchFiles(patch)
	if len(files) > maxApplyFiles {
		return ErrPatchTooLarge
	}
	for _, f := range files {
		rel := p.rel(f)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			continue // outside dir: git apply run there leaves it alone
		}
		if denied != nil && (denied(rel) || resolvedDenied(dir, rel, denied)) {
			return &DeniedError{Path: rel}
		}
	}
	c := p.repo.Cmd(p.dir, "apply", "--whitespace=nowarn", "-")
	c.Stdin = strings.NewReader(patch)
	if _, err := safegit.Output(ctx, c); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ApplyError{Reason: "not-clean", Message: "Patch can't be applied: " + gitMessage(err)}
	}
	return nil
}

// resolvedDenied reports whether rel, where it exists, leads through
// links to a path denied.
func resolvedDenied(dir, rel string, denied func(string) bool) bool {
	real, ok := Resolved(dir, rel)
	return ok && real != rel && denied(real)
}

// gitMessage is the part of a git failure worth showing: what git wrote.
func gitMessage(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	return msg
}

// patchFiles lists every path a patch names, from the repository's root,
// as git apply reads them (its first component stripped, -p1): the
// diff --git header's two, the ---/+++ lines', and renames' and copies'.
// It may list more than git would touch (a hunk's line that looks like a
// header), never less.
func patchFiles(patch string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p != "" && p != "/dev/null" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(patch))
	sc.Buffer(make([]byte, 64<<10), MaxApplyBytes+1)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "diff --git "):
			a, b := gitHeaderPaths(strings.TrimPrefix(line, "diff --git "))
			add(stripFirst(a))
			add(stripFirst(b))
		case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "):
			add(stripFirst(patchPath(line[4:], true)))
		}
		for _, pre := range []string{"rename from ", "rename to ", "copy from ", "copy to "} {
			if rest, ok := strings.CutPrefix(line, pre); ok {
				add(patchPath(rest, false))
			}
		}
	}
	return out
}

// gitHeaderPaths splits "a/x b/y" (each maybe quoted) into its two paths.
func gitHeaderPaths(rest string) (string, string) {
	if strings.HasPrefix(rest, `"`) {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			return patchPath(q, false), patchPath(strings.TrimSpace(rest[len(q):]), false)
		}
	}
	if i := strings.Index(rest, " b/"); i >= 0 {
		return rest[:i], patchPath(rest[i+1:], false)
	}
	a, b, _ := strings.Cut(rest, " ")
	return a, patchPath(b, false)
}

// patchPath reads one path of a patch's header: C-quoted when it holds
// special characters; on ---/+++ lines (timed) a tab may end it.
func patchPath(p string, timed bool) string {
	p = strings.TrimSpace(p)
	if strings.HasPrefix(p, `"`) {
		if q, err := strconv.QuotedPrefix(p); err == nil {
			if u, err := strconv.Unquote(q); err == nil {
				return u
			}
		}
	}
	if timed {
		p, _, _ = strings.Cut(p, "\t")
	}
	return p
}

// stripFirst drops a path's first component, as git apply's -p1 does.
func stripFirst(p string) string {
	if p == "/dev/null" {
		return ""
	}
	if _, rest, ok := strings.Cut(p, "/"); ok {
		return filepath.ToSlash(filepath.Clean(rest))
	}
	return p
}
