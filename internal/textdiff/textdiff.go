// Package textdiff writes the unified diff of two texts, line by line, in
// the shape opencode's edit tool gives its clients (jsdiff's
// createTwoFilesPatch: an Index line, a rule, ---/+++ headers and hunks
// with four lines of context), so that opencode's TUI, web app and
// plugins render agentd's edits as they render opencode's.
//
// The diff is minimal (Myers' algorithm) after the common head and tail
// are set aside, within a budget of differences: past it, the changed
// middle is written as removed, then added, which is still a correct
// patch. The text written is bounded too: whole hunks are kept until the
// bound, the counts stay exact.
package textdiff

import (
	"strconv"
	"strings"
)

// Options bound a diff.
type Options struct {
	// Context is the lines of context around each change (default 4,
	// jsdiff's).
	Context int
	// MaxBytes bounds the patch text (0: no bound); hunks past it are
	// left out and Cut is set.
	MaxBytes int
}

// Result is a diff: its patch and how many lines it adds and removes.
type Result struct {
	Patch     string
	Additions int
	Deletions int
	// Cut is set when hunks were left out of Patch (MaxBytes).
	Cut bool
}

// maxEdits is the budget of differences the minimal diff looks for;
// maxMiddle bounds the lines it compares once the common head and tail
// are set aside. Past either, the middle is replaced whole.
const (
	maxEdits  = 1000
	maxMiddle = 100_000
)

// Unified diffs before and after, naming the file name on both sides.
func Unified(name, before, after string, o Options) Result {
	if o.Context <= 0 {
		o.Context = 4
	}
	a, b := split(before), split(after)
	ops := script(a, b)
	var r Result
	for _, op := range ops {
		switch op.kind {
		case '+':
			r.Additions++
		case '-':
			r.Deletions++
		}
	}
	var sb strings.Builder
	sb.WriteString("Index: " + name + "\n")
	sb.WriteString(strings.Repeat("=", 67) + "\n")
	sb.WriteString("--- " + name + "\n+++ " + name + "\n")
	for _, h := range hunks(ops, o.Context) {
		// A hunk too long for the bound is not even formatted.
		if o.MaxBytes > 0 && sb.Len()+h.size(a, b) > o.MaxBytes {
			r.Cut = true
			break
		}
		text := h.format(a, b)
		if o.MaxBytes > 0 && sb.Len()+len(text) > o.MaxBytes {
			r.Cut = true
			break
		}
		sb.WriteString(text)
	}
	r.Patch = sb.String()
	return r
}

// split cuts s into lines, each with its line ending (the last may have
// none).
func split(s string) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// op is one line of the edit script: kept (' '), removed ('-') or added
// ('+'), with its index in a (kept, removed) or b (added).
type op struct {
	kind byte
	a, b int
}

// script is the edit script turning a into b.
func script(a, b []string) []op {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	ops := make([]op, 0, len(a)+len(b)-head-tail)
	for i := range head {
		ops = append(ops, op{' ', i, i})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	mid, ok := myers(ma, mb)
	if !ok {
		mid = mid[:0]
		for i := range ma {
			mid = append(mid, op{'-', i, 0})
		}
		for j := range mb {
			mid = append(mid, op{'+', len(ma), j})
		}
	}
	for _, o := range mid {
		ops = append(ops, op{o.kind, o.a + head, o.b + head})
	}
	for i := range tail {
		ops = append(ops, op{' ', len(a) - tail + i, len(b) - tail + i})
	}
	return ops
}

// myers finds a shortest edit script from a to b; ok is false when it
// needs more than maxEdits differences or the texts are too long to
// compare.
func myers(a, b []string) ([]op, bool) {
	n, m := len(a), len(b)
	if n+m > maxMiddle {
		return nil, false
	}
	// trace[d] holds, for each diagonal k in [-d, d], the furthest x
	// reached with d differences (at index k+d).
	var trace [][]int
	prev := func(d, k int) int {
		if d == 0 {
			return 0
		}
		return trace[d-1][k+d-1]
	}
	for d := 0; d <= min(n+m, maxEdits); d++ {
		v := make([]int, 2*d+1)
		for k := -d; k <= d; k += 2 {
			var x int
			if d == 0 {
				x = 0
			} else if k == -d || (k != d && prev(d, k-1) < prev(d, k+1)) {
				x = prev(d, k+1) // down: b[y] added
			} else {
				x = prev(d, k-1) + 1 // right: a[x] removed
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[k+d] = x
			if x >= n && y >= m {
				trace = append(trace, v)
				return backtrack(trace, n, m), true
			}
		}
		trace = append(trace, v)
	}
	return nil, false
}

// backtrack walks the trace back from (n, m) and returns the script in
// order.
func backtrack(trace [][]int, n, m int) []op {
	var rev []op
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		k := x - y
		prevK := k - 1
		if k == -d || (k != d && trace[d-1][k-1+d-1] < trace[d-1][k+1+d-1]) {
			prevK = k + 1
		}
		px := trace[d-1][prevK+d-1]
		py := px - prevK
		sx, sy := px, py // where the move lands
		if prevK == k+1 {
			sy++
		} else {
			sx++
		}
		for x > sx && y > sy {
			x--
			y--
			rev = append(rev, op{' ', x, y})
		}
		if prevK == k+1 {
			rev = append(rev, op{'+', px, py})
		} else {
			rev = append(rev, op{'-', px, py})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, op{' ', x, y})
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// hunk is a run of the script with its context.
type hunk struct {
	ops                []op
	oldStart, newStart int // 1-based
}

// hunks groups the changes of ops with ctx lines of context, merging
// groups whose context would touch.
func hunks(ops []op, ctx int) []hunk {
	var out []hunk
	start := -1
	lastChange := -1
	flush := func(end int) {
		from := max(start-ctx, 0)
		to := min(end+ctx+1, len(ops))
		h := hunk{ops: ops[from:to]}
		// Count the lines before from.
		ol, nl := 0, 0
		for _, o := range ops[:from] {
			if o.kind != '+' {
				ol++
			}
			if o.kind != '-' {
				nl++
			}
		}
		h.oldStart, h.newStart = ol+1, nl+1
		out = append(out, h)
	}
	for i, o := range ops {
		if o.kind == ' ' {
			continue
		}
		if start >= 0 && i-lastChange > 2*ctx {
			flush(lastChange)
			start = -1
		}
		if start < 0 {
			start = i
		}
		lastChange = i
	}
	if start >= 0 {
		flush(lastChange)
	}
	return out
}

// size is at least the length of the hunk's lines as format writes them.
func (h hunk) size(a, b []string) int {
	n := 0
	for _, o := range h.ops {
		if o.kind == '+' {
			n += len(b[o.b]) + 1
		} else {
			n += len(a[o.a]) + 1
		}
	}
	return n
}

// format writes the hunk: its header and lines, marking a line without a
// line ending as git and jsdiff do.
func (h hunk) format(a, b []string) string {
	oldLines, newLines := 0, 0
	for _, o := range h.ops {
		if o.kind != '+' {
			oldLines++
		}
		if o.kind != '-' {
			newLines++
		}
	}
	oldStart, newStart := h.oldStart, h.newStart
	if oldLines == 0 {
		oldStart--
	}
	if newLines == 0 {
		newStart--
	}
	var sb strings.Builder
	sb.WriteString("@@ -" + strconv.Itoa(oldStart) + "," + strconv.Itoa(oldLines) + " +" + strconv.Itoa(newStart) + "," + strconv.Itoa(newLines) + " @@\n")
	for _, o := range h.ops {
		var line string
		if o.kind == '+' {
			line = b[o.b]
		} else {
			line = a[o.a]
		}
		sb.WriteByte(o.kind)
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
	return sb.String()
}
