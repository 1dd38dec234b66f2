package builtin

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/shell"
	"github.com/agentd/agentd/internal/tool"
)

// pathJudge collects what a shell command's files need: directories
// outside the workspace, files it writes, and those in .git/ or .agentd/.
type pathJudge struct {
	call      tool.Call
	ws        string            // the workspace, symlinks resolved once
	dirs      map[string]string // the commands' directories, resolved
	outside   []string
	edits     []string
	protected []string
}

// readers never write the files their arguments name: naming a file in
// .git/ or .agentd/ is no write there.
var readers = map[string]bool{
	"cat": true, "head": true, "tail": true, "ls": true, "stat": true, "file": true, "wc": true,
	"grep": true, "egrep": true, "fgrep": true, "rg": true, "diff": true, "cmp": true, "md5sum": true,
	"sha1sum": true, "sha256sum": true, "sha512sum": true, "xxd": true, "od": true, "hexdump": true,
	"strings": true, "tree": true, "du": true, "git": true, "test": true, "[": true, "[[": true,
	"echo": true, "printf": true, "realpath": true, "readlink": true, "basename": true,
	"dirname": true, "nl": true, "cd": true, "pushd": true, "less": true, "more": true,
}

// resolve is where p, from dir, lands (symlinks followed, as Resolve
// does) and whether that is outside the workspace; false when it cannot
// be told.
func (j *pathJudge) resolve(dir, p string) (string, bool, bool) {
	if j.ws == "" {
		ws, err := realPath(j.call.Directory)
		if err != nil {
			return "", false, false
		}
		j.ws, j.dirs = ws, map[string]string{}
	}
	if deviceFile(p) || strings.ContainsRune(p, 0) {
		return "", false, false
	}
	if abs, ok := j.plain(dir, p); ok {
		return abs, !Within(j.ws, abs), true
	}
	abs, err := realPath(join(dir, p))
	if err != nil {
		return "", false, false
	}
	return abs, !Within(j.ws, abs), true
}

// plain resolves, with one lstat, the common argument that is no path at
// all: a relative word without ".." whose first component does not exist
// cannot lead through a symlink.
func (j *pathJudge) plain(dir, p string) (string, bool) {
	if filepath.IsAbs(p) || strings.HasPrefix(p, "~") || slices.Contains(strings.Split(p, "/"), "..") {
		return "", false
	}
	real, ok := j.dirs[dir]
	if !ok {
		r, err := realPath(dir)
		if err != nil {
			return "", false
		}
		real, j.dirs[dir] = r, r
	}
	first, _, _ := strings.Cut(filepath.Clean(p), "/")
	if _, err := os.Lstat(filepath.Join(real, first)); !errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	return filepath.Join(real, p), true
}

// out records a path outside the workspace, by the directory a grant
// would name; paths in the call's ReadDirs are not outside.
func (j *pathJudge) out(abs string) {
	if inReadDirs(j.call, abs) {
		return
	}
	if strings.ContainsAny(filepath.Base(abs), "*?[") || !isDir(abs) {
		abs = filepath.Dir(abs)
	}
	j.outside = appendNew(j.outside, abs)
}

// command judges the paths among a command's arguments, from every
// directory it may run in.
func (j *pathJudge) command(c shell.Command) {
	name := ""
	if len(c.Words) > 0 {
		name = filepath.Base(c.Words[0])
	}
	for _, p := range pathCandidates(c.Args) {
		for _, d := range c.Dirs {
			abs, outside, ok := j.resolve(d, p)
			switch {
			case !ok:
			case outside:
				j.out(abs)
			case !readers[name]:
				j.protect(abs)
			}
		}
	}
}

// redirect judges a redirection's files; false when they are only known
// at run time.
func (j *pathJudge) redirect(r shell.Redirect) bool {
	if r.Targets == nil {
		return false
	}
	for _, t := range r.Targets {
		for _, d := range r.Dirs {
			abs, outside, ok := j.resolve(d, t)
			switch {
			case !ok:
			case outside:
				j.out(abs)
			case r.Write:
				j.edits = appendNew(j.edits, rel(j.ws, abs))
				j.protect(abs)
			}
		}
	}
	return true
}

// protect records a write to a path in .git/ or .agentd/.
func (j *pathJudge) protect(abs string) {
	if r := rel(j.ws, abs); Protected(r) {
		j.protected = appendNew(j.protected, r)
	}
}

// needs are the external_directory, edit and edit_protected needs of the
// files judged (one need each, for all the paths: one question).
func (j *pathJudge) needs(command string) []tool.Need {
	var needs []tool.Need
	if len(j.outside) > 0 {
		var always []string
		for _, d := range j.outside {
			always = append(always, d, d+"/*")
		}
		needs = append(needs, tool.Need{Permission: "external_directory", Patterns: j.outside, Always: always,
			Title: "Access " + strings.Join(j.outside, ", ") + " outside the workspace", Metadata: map[string]any{"command": command}})
	}
	if len(j.edits) > 0 {
		needs = append(needs, tool.Need{Permission: "edit", Patterns: j.edits, Always: []string{"*"}, Title: "edit " + strings.Join(j.edits, ", ")})
	}
	if len(j.protected) > 0 {
		needs = append(needs, protectedNeed(j.protected))
	}
	return needs
}

// pathCandidates are the strings among a command's expanded arguments
// that may name files: each argument, the value of KEY=value and
// --option=value, and the value glued to a short option (-o/x, -C..).
func pathCandidates(args []string) []string {
	var out []string
	for _, a := range args {
		if a == "" || a == "-" || a == "--" {
			continue
		}
		out = append(out, a)
		if k, v, ok := strings.Cut(a, "="); ok && v != "" && optionKey(k) {
			out = append(out, v)
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
			out = append(out, a[2:])
			if i := strings.IndexAny(a[2:], "/~"); i > 0 {
				out = append(out, a[2+i:])
			}
		}
	}
	return out
}

// optionKey reports the key of a KEY=value or --option=value argument
// (dd's of=, make's DESTDIR=), rather than the text of a URL or a message.
func optionKey(k string) bool {
	k = strings.TrimLeft(k, "-")
	if k == "" {
		return false
	}
	for _, r := range k {
		if r != '_' && r != '-' && r != '.' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// Protected reports whether a path relative to the workspace lies in a
// .git or .agentd directory (or is one), anywhere in the workspace.
func Protected(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == ".git" || part == ".agentd" {
			return true
		}
	}
	return false
}

// protectedNeed asks for writes to .git/ or .agentd/ on top of edit: a
// grant covers only the very paths asked for.
func protectedNeed(paths []string) tool.Need {
	return tool.Need{Permission: permission.EditProtected, Patterns: paths, Always: paths, Exact: paths,
		Title:    "Write " + strings.Join(paths, ", ") + " (git's or agentd's own files: a write there can run code)",
		Metadata: map[string]any{"paths": paths}}
}

// deviceFile reports the device files commands commonly read and write
// that hold nothing of the machine's.
func deviceFile(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/random", "/dev/urandom":
		return true
	}
	return false
}

// join resolves p against the command's directory, expanding a leading
// "~" or "~user" as bash would (the parser already expanded those it
// could; this is for paths glued to options).
func join(dir, p string) string {
	if strings.HasPrefix(p, "~") {
		name, rest, _ := strings.Cut(p[1:], "/")
		home := ""
		if name == "" {
			home, _ = os.UserHomeDir()
		} else if u, err := user.Lookup(name); err == nil {
			home = u.HomeDir
		}
		if home != "" {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
