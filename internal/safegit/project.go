package safegit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/smallfile"
)

// ErrNoRepo is returned by Project for a directory in no git repository
// that it can read.
var ErrNoRepo = errors.New("not in a git repository")

// Repo is a project's repository as Project opens it: git commands run in
// it read the project's objects, refs and index, but a configuration of
// agentd's own. Close removes what Project made.
type Repo struct {
	// Root is the repository's work tree.
	Root   string
	shadow string
	index  string
	object string
}

// Project opens the git repository whose work tree is root, for commands
// that only read (status, diff against HEAD), without ever letting git
// read the repository's configuration or attributes file: the model can
// write .git/config (a filter, an fsmonitor or a textconv command there
// would run with every git command) and rewrite it at any moment, so git
// gets a private git directory instead. Its configuration is agentd's,
// holding only the settings of the project's that are plain values git
// needs to read the repository the same way (format, extensions, how the
// work tree compares to the index); its HEAD is a copy; refs, objects and
// the index are the project's, reached through links and GIT_OBJECT_DIRECTORY
// / GIT_INDEX_FILE. Nothing is read from the project's configuration but
// those values, so rewriting it between our read and git's changes
// nothing git runs.
func Project(ctx context.Context, root string) (*Repo, error) {
	gitDir, common, err := gitDirs(root)
	if err != nil {
		return nil, err
	}
	shadow, err := os.MkdirTemp("", "agentd-git-*")
	if err != nil {
		return nil, fmt.Errorf("project git: %w", err)
	}
	r := &Repo{Root: root, shadow: shadow, index: filepath.Join(gitDir, "index"), object: filepath.Join(common, "objects")}
	if err := r.build(ctx, gitDir, common); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close removes the private git directory.
func (r *Repo) Close() {
	if r != nil && r.shadow != "" {
		_ = os.RemoveAll(r.shadow)
	}
}

// Cmd is a command in the repository: the private git directory, the
// project's work tree, index and objects, run in dir.
func (r *Repo) Cmd(dir string, args ...string) Cmd {
	return Cmd{Dir: dir, GitDir: r.shadow, WorkTree: r.Root, IndexFile: r.index, ObjectDir: r.object, Args: args}
}

// gitDirs finds the git directory of the work tree at root (.git, or the
// directory a .git file names, as linked work trees have) and its common
// directory (where objects, refs and the configuration live).
func gitDirs(root string) (gitDir, common string, err error) {
	dotGit := filepath.Join(root, ".git")
	st, err := os.Stat(dotGit)
	if err != nil {
		return "", "", ErrNoRepo
	}
	gitDir = dotGit
	if !st.IsDir() {
		b, err := smallfile.ReadNoFollow(dotGit)
		d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if err != nil || !ok {
			return "", "", ErrNoRepo
		}
		gitDir = absFrom(root, strings.TrimSpace(d))
	}
	common = gitDir
	if b, err := smallfile.ReadNoFollow(filepath.Join(gitDir, "commondir")); err == nil {
		common = absFrom(gitDir, strings.TrimSpace(string(b)))
	}
	for _, d := range []string{gitDir, common} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", "", ErrNoRepo
		}
	}
	return gitDir, common, nil
}

func absFrom(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// build fills the private git directory: HEAD copied, refs linked, and a
// configuration written from the project's plain values.
func (r *Repo) build(ctx context.Context, gitDir, common string) error {
	head, err := smallfile.ReadNoFollow(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return ErrNoRepo
	}
	if err := os.WriteFile(filepath.Join(r.shadow, "HEAD"), head, 0o600); err != nil {
		return err
	}
	for _, name := range []string{"refs", "packed-refs", "reftable", "shallow"} {
		if err := linkIfExists(filepath.Join(common, name), filepath.Join(r.shadow, name)); err != nil {
			return err
		}
	}
	// A split index keeps its shared part beside it, found in GIT_DIR.
	if shared, _ := filepath.Glob(filepath.Join(gitDir, "sharedindex.*")); len(shared) > 0 {
		for _, s := range shared {
			if err := linkIfExists(s, filepath.Join(r.shadow, filepath.Base(s))); err != nil {
				return err
			}
		}
	}
	if err := os.Mkdir(filepath.Join(r.shadow, "info"), 0o700); err != nil {
		return err
	}
	if err := linkIfExists(filepath.Join(common, "info", "exclude"), filepath.Join(r.shadow, "info", "exclude")); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(r.shadow, "refs")); err != nil {
		// git wants a refs directory even where the refs live elsewhere.
		if err := os.Mkdir(filepath.Join(r.shadow, "refs"), 0o700); err != nil {
			return err
		}
	}
	// A first configuration lets git read the project's as a plain file.
	cfg := filepath.Join(r.shadow, "config")
	if err := os.WriteFile(cfg, []byte("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"), 0o600); err != nil {
		return err
	}
	values, err := r.projectValues(ctx, filepath.Join(common, "config"))
	if err != nil {
		return err
	}
	return os.WriteFile(cfg, values, 0o600)
}

// linkIfExists links to from, when from exists.
func linkIfExists(target, link string) error {
	if _, err := os.Lstat(target); err != nil {
		return nil
	}
	return os.Symlink(target, link)
}

// copied are the project's settings Project's configuration keeps: plain
// values (never a command, a path or an include) that decide how git
// reads the repository and compares the work tree to the index.
var copied = map[string]bool{
	"core.repositoryformatversion": true, "core.ignorecase": true, "core.precomposeunicode": true,
	"core.filemode": true, "core.symlinks": true, "core.trustctime": true, "core.checkstat": true,
	"core.autocrlf": true, "core.eol": true, "core.sparsecheckout": true, "core.sparsecheckoutcone": true,
	"core.splitindex": true, "core.untrackedcache": true, "index.sparse": true, "core.protecthfs": true,
	"core.protectntfs": true,
}

// plainValue says whether v is what a copied value may hold: at most 64
// of A-Z, a-z, 0-9, '.', '_' and '-'. A loop rather than a regexp: the
// bounded repetition compiled into 64 copies of the class, 61 KB and 875
// allocations at every start of agentd.
func plainValue(v string) bool {
	if len(v) > 64 {
		return false
	}
	for _, c := range []byte(v) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// projectValues reads the project's configuration file (as a file: no
// include is followed) and returns agentd's configuration for the
// private git directory: the copied settings and the repository's
// extensions (but the partial clone's, which would fetch), with bare
// false.
func (r *Repo) projectValues(ctx context.Context, file string) ([]byte, error) {
	c := r.Cmd(r.shadow, "config", "--file", file, "--no-includes", "-z", "--list")
	c.WorkTree = ""
	out, err := Output(ctx, c)
	if err != nil {
		var exit interface{ ExitCode() int }
		if !errors.As(err, &exit) {
			return nil, err
		}
		out = nil // no configuration file: git's defaults
	}
	sections := map[string][]string{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		key, val, _ := strings.Cut(string(rec), "\n")
		sec, name, ok := strings.Cut(key, ".")
		if !ok || !plainValue(val) || strings.Contains(name, ".") {
			continue
		}
		ext := sec == "extensions" && name != "partialclone" && name != "worktreeconfig" && plainValue(name)
		if !copied[key] && !ext {
			continue
		}
		sections[sec] = append(sections[sec], "\t"+name+" = "+val+"\n")
	}
	var b strings.Builder
	b.WriteString("[core]\n\tbare = false\n")
	for _, l := range sections["core"] {
		b.WriteString(l)
	}
	for _, sec := range []string{"index", "extensions"} {
		if len(sections[sec]) > 0 {
			b.WriteString("[" + sec + "]\n")
			for _, l := range sections[sec] {
				b.WriteString(l)
			}
		}
	}
	return []byte(b.String()), nil
}
