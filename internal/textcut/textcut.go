// Package textcut cuts a text too long for the model's conversation to
// its head, at a line's end, so that the note saying so can count what
// was shown.
package textcut

import "strings"

// Head cuts text to its first maxLines lines and then to maxBytes bytes,
// at the end of the last whole line within them when there is one. cut is
// false, and head text, when it fits whole; lines and shown count the
// lines of text and of head.
func Head(text string, maxLines, maxBytes int) (head string, lines, shown int, cut bool) {
	lines = strings.Count(text, "\n") + 1
	if len(text) <= maxBytes && lines <= maxLines {
		return text, lines, lines, false
	}
	head = text
	if i := nthIndex(head, '\n', maxLines); i >= 0 {
		head = head[:i]
	}
	if len(head) > maxBytes {
		head = head[:maxBytes]
		if i := strings.LastIndexByte(head, '\n'); i > 0 {
			head = head[:i]
		}
	}
	return head, lines, strings.Count(head, "\n") + 1, true
}

// nthIndex returns the index of the n-th occurrence of c in s, or -1.
func nthIndex(s string, c byte, n int) int {
	off := 0
	for {
		i := strings.IndexByte(s[off:], c)
		if i < 0 {
			return -1
		}
		n--
		if n == 0 {
			return off + i
		}
		off += i + 1
	}
}
