package textcut

import (
	"strings"
	"testing"
)

// TestHead cuts by lines, by bytes at a line's end (or mid-line when one
// line is too long), and leaves a text that fits whole.
func TestHead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text               string
		maxLines, maxBytes int
		head               string
		lines, shown       int
		cut                bool
	}{
		{"a\nb\nc", 3, 100, "a\nb\nc", 3, 3, false},
		{"a\nb\nc\nd", 2, 100, "a\nb", 4, 2, true},
		{"aaaa\nbbbb\ncccc", 10, 7, "aaaa", 3, 1, true},
		{strings.Repeat("x", 10), 10, 4, "xxxx", 1, 1, true},
	} {
		head, lines, shown, cut := Head(c.text, c.maxLines, c.maxBytes)
		if head != c.head || lines != c.lines || shown != c.shown || cut != c.cut {
			t.Errorf("Head(%q, %d, %d) = %q, %d, %d, %v; want %q, %d, %d, %v", c.text, c.maxLines, c.maxBytes,
				head, lines, shown, cut, c.head, c.lines, c.shown, c.cut)
		}
	}
}
