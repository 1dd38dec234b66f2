package workspace

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"time"
)

// Limits of a search: the files a fuzzy search looks at, and the matches
// and the time of a text search.
const (
	maxWalk     = 50_000
	maxMatches  = 200
	findTimeout = 10 * time.Second
	maxLine     = 2000
	// maxScanLine bounds the bytes of one line a text search holds: the
	// walker matches within a longer line's first maxScanLine bytes; of
	// ripgrep's output, an event longer than that is skipped.
	maxScanLine = 1 << 20
)

// Entry is one result of a file search, in opencode's FileSystemEntry
// shape: folders end with "/".
type Entry struct {
	Path string `json:"path"`
	Type string `json:"type"`
}

// walk calls fn for the files and folders under dir (relative, slash
// separated), never following a symlink, leaving the skipped folders out,
// until fn returns false or maxWalk entries were seen.
func walk(ctx context.Context, root *os.Root, fn func(rel string, isDir bool) bool) error {
	n := 0
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == "." {
			return nil
		}
		if d.IsDir() && skipped[d.Name()] {
			return fs.SkipDir
		}
		if n++; n > maxWalk || !fn(p, d.IsDir()) {
			return fs.SkipAll
		}
		return nil
	})
}

// Match is one line a text search found, in opencode's (ripgrep's) shape.
type Match struct {
	Path           Text       `json:"path"`
	Lines          Text       `json:"lines"`
	LineNumber     int        `json:"line_number"`
	AbsoluteOffset int        `json:"absolute_offset"`
	Submatches     []Submatch `json:"submatches"`
}

// Text is ripgrep's {text} wrapper.
type Text struct {
	Text string `json:"text"`
}

// Submatch is where in a line the pattern matched.
type Submatch struct {
	Match Text `json:"match"`
	Start int  `json:"start"`
	End   int  `json:"end"`
}

// Grep finds the lines of the directory's files that match the regular
// expression pattern: through ripgrep when it is installed, else by
// walking; at most maxMatches, within findTimeout.
func Grep(ctx context.Context, dir, pattern string) ([]Match, error) {
	rg, _ := exec.LookPath("rg")
	return grep(ctx, dir, pattern, rg)
}

// grep searches through rg when it is given, else by walking.
func grep(ctx context.Context, dir, pattern, rg string) ([]Match, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	if rg != "" {
		return ripgrep(ctx, rg, dir, pattern)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	out := []Match{}
	err = walk(ctx, root, func(p string, isDir bool) bool {
		if isDir {
			return true
		}
		out = append(out, grepFile(root, p, re, maxMatches-len(out))...)
		return len(out) < maxMatches
	})
	if ctx.Err() != nil {
		err = nil // what was found in time is the answer
	}
	return out, err
}

func grepFile(root *os.Root, p string, re *regexp.Regexp, room int) []Match {
	f, err := root.OpenFile(p, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	var out []Match
	br := bufio.NewReaderSize(f, 64<<10)
	offset := 0
	for n := 1; len(out) < room; n++ {
		head, size, err := readLine(br, maxScanLine)
		line := string(head)
		if n == 1 && binary(head) {
			return nil
		}
		if len(line) > 0 {
			if locs := re.FindAllStringIndex(line, 8); locs != nil {
				m := Match{Path: Text{path.Clean(p)}, Lines: Text{cut(line)}, LineNumber: n, AbsoluteOffset: offset}
				for _, l := range locs {
					m.Submatches = append(m.Submatches, Submatch{Match: Text{cut(line[l[0]:l[1]])}, Start: l[0], End: l[1]})
				}
				out = append(out, m)
			}
		}
		offset += size
		if err != nil {
			break
		}
	}
	return out
}

// readLine reads one line (its newline included) and returns at most its
// first max bytes, the rest read and dropped, with the line's whole size:
// a file with a line of a gigabyte costs max bytes of memory, and the
// lines after it are still searched.
func readLine(br *bufio.Reader, max int) ([]byte, int, error) {
	var line []byte
	size := 0
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if room := max - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if err != bufio.ErrBufferFull {
			return line, size, err
		}
	}
}

func cut(line string) string {
	if len(line) > maxLine {
		return strings.ToValidUTF8(line[:maxLine], "") + "…"
	}
	return line
}

// ripgrep streams rg's JSON matches, stopping it at maxMatches.
func ripgrep(ctx context.Context, rg, dir, pattern string) ([]Match, error) {
	cmd := exec.CommandContext(ctx, rg, "--json", "--no-messages", "-g", "!.git", "-g", "!node_modules", "-g", "!.agentd",
		"--max-columns", "2000", "-e", pattern, ".")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	out := []Match{}
	br := bufio.NewReaderSize(stdout, 64<<10)
	for len(out) < maxMatches {
		// rg's JSON carries a matched line whole (--max-columns does not
		// apply to it): an event over maxScanLine is dropped, the search
		// goes on (a scanner stopped there and the answer lost every
		// match after it).
		line, size, err := readLine(br, maxScanLine+1)
		if err != nil && size == 0 {
			break
		}
		var ev struct {
			Type string `json:"type"`
			Data Match  `json:"data"`
		}
		if size > maxScanLine || json.Unmarshal(line, &ev) != nil || ev.Type != "match" {
			continue
		}
		ev.Data.Path.Text = strings.TrimPrefix(ev.Data.Path.Text, "./")
		ev.Data.Lines.Text = cut(ev.Data.Lines.Text)
		if ev.Data.Submatches == nil {
			ev.Data.Submatches = []Submatch{}
		}
		for i := range ev.Data.Submatches {
			ev.Data.Submatches[i].Match.Text = cut(ev.Data.Submatches[i].Match.Text)
		}
		out = append(out, ev.Data)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return out, nil
}
