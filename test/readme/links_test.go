package readme_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLinks: every relative link of the README and the pages under docs/
// reaches a file of the repository, and its #anchor a heading of that file
// (as GitHub names them), so that splitting or renaming a section cannot
// leave a reader at a dead end.
func TestLinks(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages(t) {
		src, _, inCode := parsePage(t, page)
		for i, line := range strings.Split(string(src), "\n") {
			if inCode[i+1] {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				}
				b, err := os.ReadFile(filepath.Join("../..", path))
				if err != nil {
					t.Errorf("%s:%d: %s: no such file %s", page, i+1, target, path)
					continue
				}
				if anchor != "" && !anchors(string(b))[anchor] {
					t.Errorf("%s:%d: %s: %s has no heading #%s", page, i+1, target, path, anchor)
				}
			}
		}
	}
}

// anchors returns the ids GitHub gives a Markdown file's headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var id strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				id.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				id.WriteRune(r)
			}
		}
		base := id.String()
		name := base
		for n := 1; out[name]; n++ {
			name = base + "-" + string(rune('0'+n))
		}
		out[name] = true
	}
	return out
}
