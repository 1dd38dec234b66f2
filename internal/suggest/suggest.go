// Package suggest finds, among known names, the one a mistyped name most
// likely meant: "did you mean …" for configuration keys, commands,
// providers and models.
package suggest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Nearest returns the candidate closest to s in edits (case ignored, a
// swap of neighbours one edit), or "" when none is close enough to be
// what was meant.
func Nearest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := distance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, min(3, utf8.RuneCountInString(s)/3))
	if bestD > limit {
		return ""
	}
	return best
}

// distance is the optimal string alignment distance of a and b.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// Hint says what a person who wrote word might have meant: `did you mean
// "X"? ` when a known name is close, then the known names, at most max of
// them (0: all).
func Hint(word string, known []string, max int) string {
	var b strings.Builder
	if near := Nearest(word, known); near != "" && near != word {
		fmt.Fprintf(&b, "did you mean %q? ", near)
	}
	list, more := known, ""
	if max > 0 && len(list) > max {
		list, more = list[:max], fmt.Sprintf(", … (%d more)", len(known)-max)
	}
	fmt.Fprintf(&b, "known: %s%s", strings.Join(list, ", "), more)
	return b.String()
}
