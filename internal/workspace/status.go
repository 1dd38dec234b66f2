package workspace

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/safegit"
	"github.com/agentd/agentd/internal/vcs"
)

// Change is a file the project's git sees changed, in opencode's File
// shape.
type Change struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Status  string `json:"status"`
}

// Status lists what the project's git sees changed in the working tree
// against HEAD (new files included): empty outside a repository or
// without git. It only reads: no lock is taken, the index is not
// refreshed, and the repository's configuration and attributes file are
// never read (safegit.Project), so nothing written there runs.
func Status(ctx context.Context, dir string) ([]Change, error) {
	out := []Change{}
	root, ok := vcs.Root(dir)
	if !ok || !safegit.Available() {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The project's git, never its configuration (safegit.Project): a
	// filter or fsmonitor the model wrote into .git/config runs nothing.
	repo, err := safegit.Project(ctx, root)
	if err != nil {
		return out, nil // not a repository agentd can read: nothing to report
	}
	defer repo.Close()
	run := func(args ...string) ([]byte, error) {
		return safegit.Output(ctx, repo.Cmd(dir, args...))
	}
	stat, err := run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all", "--", ".")
	if err != nil {
		return out, nil // not a repository git can read: nothing to report
	}
	num, _ := run("diff", "--numstat", "-z", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all", "HEAD", "--", ".")
	counts := map[string][2]int{}
	for _, rec := range bytes.Split(num, []byte{0}) {
		f := strings.SplitN(string(rec), "\t", 3)
		if len(f) == 3 {
			a, _ := strconv.Atoi(f[0])
			d, _ := strconv.Atoi(f[1])
			counts[f[2]] = [2]int{a, d}
		}
	}
	recs := bytes.Split(stat, []byte{0})
	for i := 0; i < len(recs); i++ {
		rec := string(recs[i])
		if len(rec) < 4 {
			continue
		}
		code, p := rec[:2], rec[3:]
		if code[0] == 'R' || code[0] == 'C' {
			i++ // the source path of a rename follows
		}
		c := Change{Path: p, Status: "modified"}
		switch {
		case code == "??" || strings.Contains(code, "A"):
			c.Status = "added"
		case strings.Contains(code, "D"):
			c.Status = "deleted"
		}
		c.Added, c.Removed = counts[p][0], counts[p][1]
		if c.Status == "added" && c.Added == 0 {
			c.Added = countLines(dir, p)
		}
		out = append(out, c)
	}
	return out, nil
}

// countLines counts an untracked file's lines (git's numstat does not see
// it).
func countLines(dir, p string) int {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0
	}
	defer root.Close()
	b, err := root.ReadFile(p)
	if err != nil || len(b) > MaxContent || binary(b) {
		return 0
	}
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}
