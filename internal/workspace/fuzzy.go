package workspace

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/agentd/agentd/internal/safegit"
)

// Fuzzy file search, as opencode's /find/file and /api/fs/find answer it
// (the TUI's @ completion): the directory's files, as git sees them (the
// project's ignore rules honoured, hidden files in), and the folders that
// hold them, ranked by how well their names match the query. Outside a
// repository the directory is walked instead (skipping .git,
// node_modules and .agentd).

// Entry types.
const (
	TypeFile = "file"
	TypeDir  = "directory"
)

// maxListed bounds the files a search looks at.
const maxListed = 200_000

// Files finds the directory's files and folders (typ "file" or "directory"
// keeps one kind; "" both) whose path matches query fuzzily: each of its
// space-separated words's characters in order, case ignored. The best
// first: a match in a file's name, then in a folder's name, then in the
// path; closer, earlier and at word starts better; on a tie files before
// folders, then shorter paths. Folders end with "/". An empty query lists
// the shortest paths. hidden (when set) leaves out paths a caller must
// not show, before the limit is applied.
func Files(ctx context.Context, dir, query, typ string, limit int, hidden func(rel string) bool) ([]Entry, error) {
	if limit <= 0 || limit > 200 {
		limit = 200
	}
	ctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	files, err := listFiles(ctx, dir)
	if err != nil {
		return nil, err
	}
	words := strings.Fields(strings.ToLower(query))
	var found []scored
	consider := func(p, kind string) {
		if typ != "" && typ != kind {
			return
		}
		if s, ok := matchScore(p, kind, words); ok {
			e := Entry{Path: p, Type: kind}
			if kind == TypeDir {
				e.Path += "/"
			}
			found = append(found, scored{e, s})
		}
	}
	dirs := map[string]bool{}
	for _, f := range files {
		consider(f, TypeFile)
		for d := path.Dir(f); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			consider(d, TypeDir)
		}
	}
	rank(found)
	return present(dir, found, limit, hidden)
}

// scored is an entry and how well it matched.
type scored struct {
	e     Entry
	score int
}

// rank sorts the best first: by score, then files before folders, then
// shorter paths.
func rank(found []scored) {
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		switch {
		case a.score != b.score:
			return a.score > b.score
		case a.e.Type != b.e.Type:
			return a.e.Type == TypeFile
		case len(a.e.Path) != len(b.e.Path):
			return len(a.e.Path) < len(b.e.Path)
		}
		return a.e.Path < b.e.Path
	})
}

// present returns the first limit entries of found that exist and that
// hidden does not leave out.
func present(dir string, found []scored, limit int, hidden func(string) bool) ([]Entry, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := []Entry{}
	for _, f := range found {
		if len(out) == limit {
			break
		}
		rel := strings.TrimSuffix(f.e.Path, "/")
		if hidden != nil && hidden(rel) {
			continue
		}
		// git's index may name a file deleted since.
		if _, err := root.Lstat(rel); err == nil {
			out = append(out, f.e)
		}
	}
	return out, nil
}

// listFiles lists the directory's files, relative to it: git's (tracked
// and untracked, not ignored) in a repository, else a walk's.
func listFiles(ctx context.Context, dir string) ([]string, error) {
	if p, ok, err := openProject(ctx, dir); err == nil && ok {
		defer p.close()
		if files, err := p.lsFiles(ctx); err == nil {
			return files, nil
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var files []string
	err = walk(ctx, root, func(p string, isDir bool) bool {
		if !isDir {
			files = append(files, p)
		}
		return true
	})
	if ctx.Err() != nil {
		err = nil // what was found in time is the answer
	}
	return files, err
}

// lsFiles is git's list of the files under the project's directory that
// are tracked or untracked but not ignored, at most maxListed.
func (p *project) lsFiles(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := p.repo.Cmd(p.dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd, err := safegit.Command(ctx, c)
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = safegit.Stderr(&stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var files []string
	var rerr error
	br := bufio.NewReaderSize(stdout, 64<<10)
	for len(files) < maxListed {
		rec, err := br.ReadString(0)
		if f := strings.TrimSuffix(rec, "\x00"); f != "" && !seen[f] && !strings.HasPrefix(f, ".agentd/") {
			seen[f] = true
			files = append(files, f)
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if rerr == nil {
		cancel() // enough: git is stopped
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil && rerr == io.EOF {
		return nil, safegit.Failure(c.Args, err, stderr.Bytes())
	}
	return files, nil
}

// matchScore scores path p (of kind) against the query's words: each must
// match, in a file's name, a folder's name or the path.
func matchScore(p, kind string, words []string) (int, bool) {
	if len(words) == 0 {
		return 0, true
	}
	lower := strings.ToLower(p)
	name := lower[strings.LastIndexByte(lower, '/')+1:]
	if kind == TypeDir {
		lower += "/" // "src/" finds the folder src
	}
	total := 0
	for _, w := range words {
		switch {
		case !strings.Contains(w, "/") && subsequence(name, w):
			base := 1500 // a folder's own name
			if kind == TypeFile {
				base = 2000
			}
			total += base + quality(name, w)
		case subsequence(lower, w):
			total += 1000 + quality(lower, w)
		default:
			return 0, false
		}
	}
	return total, true
}

// subsequence reports whether q's characters appear in s in order.
func subsequence(s, q string) bool {
	j := 0
	for i := 0; i < len(s) && j < len(q); i++ {
		if s[i] == q[j] {
			j++
		}
	}
	return j == len(q)
}

// quality says how well q (a subsequence of s) matches s: whole, as a
// prefix, as a run (at a word's start better), else by its characters'
// adjacency and word starts, less a little for a longer s.
func quality(s, q string) int {
	score := -len(s) / 8
	switch i := strings.Index(s, q); {
	case s == q:
		return score + 500
	case i == 0:
		return score + 300
	case i > 0 && wordStart(s, i):
		return score + 250
	case i > 0:
		return score + 200
	}
	last := -2
	j := 0
	for i := 0; i < len(s) && j < len(q); i++ {
		if s[i] != q[j] {
			continue
		}
		if i == last+1 {
			score += 3
		}
		if wordStart(s, i) {
			score += 2
		}
		last = i
		j++
	}
	return score
}

// wordStart reports whether s[i] begins a word: the start, or after a
// separator.
func wordStart(s string, i int) bool {
	return i == 0 || strings.IndexByte("/._- ", s[i-1]) >= 0
}
