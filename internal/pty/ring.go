package pty

import (
	"sync"
	"unicode/utf8"
)

// ring keeps the last limit bytes of a terminal's output for the clients
// that connect (or reconnect) later, and wakes the connected ones when
// output arrives. Positions (cursors) count UTF-16 code units since the
// terminal started, as opencode's clients count what they receive (a
// JavaScript string's length): a client that reconnects with the cursor
// it counted gets exactly what it missed. Output is therefore kept as
// valid UTF-8 text: a sequence cut by a read waits for its end, and bytes
// that are not UTF-8 become U+FFFD.
type ring struct {
	limit int

	mu      sync.Mutex
	chunks  []chunk
	bytes   int
	end     int64 // the cursor after the last unit kept
	partial []byte
	closed  bool
	wake    chan struct{}
}

// chunk is text (valid UTF-8) that starts at cursor start and spans
// units UTF-16 code units. The last chunk grows by append while it is
// small.
type chunk struct {
	start, units int64
	text         []byte
}

// mergeBelow is the size under which output is appended to the last
// chunk instead of starting one: a terminal echoing keystrokes writes a
// byte at a time, and a chunk per byte would cost far more than the byte.
const mergeBelow = 4 << 10

func newRing(limit int) *ring { return &ring{limit: limit, wake: make(chan struct{})} }

// write adds output read from the terminal.
func (r *ring) write(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	buf := append(r.partial, p...)
	cut := completeUpTo(buf)
	r.partial = append([]byte(nil), buf[cut:]...)
	if cut == 0 {
		return
	}
	text := string(buf[:cut])
	if !utf8.ValidString(text) {
		text = toValid(text)
	}
	r.add(text)
	r.signal()
}

// add appends text (valid UTF-8) and forgets the oldest chunks past the
// limit.
func (r *ring) add(text string) {
	units := utf16Len(text)
	if n := len(r.chunks); n > 0 && len(r.chunks[n-1].text) < mergeBelow {
		last := &r.chunks[n-1]
		last.text = append(last.text, text...)
		last.units += units
	} else {
		r.chunks = append(r.chunks, chunk{start: r.end, units: units, text: []byte(text)})
	}
	r.end += units
	r.bytes += len(text)
	for r.bytes > r.limit && len(r.chunks) > 1 {
		r.bytes -= len(r.chunks[0].text)
		r.chunks[0] = chunk{}
		r.chunks = r.chunks[1:]
	}
}

// close marks the end of the output: readers get what is kept, then
// learn that there is no more.
func (r *ring) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if len(r.partial) > 0 {
		r.add(toValid(string(r.partial)))
		r.partial = nil
	}
	r.closed = true
	r.signal()
}

func (r *ring) signal() {
	close(r.wake)
	r.wake = make(chan struct{})
}

// cursor is the position after the last output kept.
func (r *ring) cursor() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end
}

// read returns the output kept from cursor from (or from the oldest kept,
// when from was forgotten) up to cursor until, at most about max bytes,
// and the cursor after it. With nothing to return it gives a channel that
// is closed when there may be, and whether the output has ended.
func (r *ring) read(from, until int64, max int) (text string, next int64, wake <-chan struct{}, ended bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if until < 0 || until > r.end {
		until = r.end
	}
	if len(r.chunks) > 0 && from < r.chunks[0].start {
		from = r.chunks[0].start
	}
	if from >= until || from >= r.end {
		return "", max64(from, 0), r.wake, r.closed
	}
	i := r.find(from)
	c := r.chunks[i]
	s, skipped := skipUnits(string(c.text), from-c.start)
	pos := c.start + skipped
	if c.start+c.units > until {
		s = takeUnits(s, until-pos)
	}
	if len(s) > max {
		s = cutAt(s, max)
	}
	return s, pos + utf16Len(s), nil, false
}

// find returns the index of the chunk holding cursor at (which is kept).
func (r *ring) find(at int64) int {
	lo, hi := 0, len(r.chunks)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if r.chunks[mid].start <= at {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// completeUpTo returns the length of p's longest prefix that does not end
// inside a UTF-8 sequence that more bytes could complete.
func completeUpTo(p []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(p); back++ {
		b := p[len(p)-back]
		if b < 0x80 {
			return len(p) // ASCII: nothing open
		}
		if b >= 0xC0 { // a leading byte: is its sequence whole?
			if !utf8.FullRune(p[len(p)-back:]) {
				return len(p) - back
			}
			return len(p)
		}
	}
	return len(p)
}

// toValid replaces each byte that is not part of valid UTF-8 with U+FFFD.
func toValid(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		out = append(out, r) // invalid bytes decode as utf8.RuneError
	}
	return string(out)
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int64 {
	var n int64
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// skipUnits drops the first n UTF-16 units of s; a cut inside a surrogate
// pair skips the whole character. It returns the rest and the units
// skipped.
func skipUnits(s string, n int64) (string, int64) {
	var done int64
	for i, r := range s {
		if done >= n {
			return s[i:], done
		}
		done++
		if r >= 0x10000 {
			done++
		}
	}
	return "", done
}

// takeUnits keeps the first n UTF-16 units of s, never half a character.
func takeUnits(s string, n int64) string {
	var done int64
	for i, r := range s {
		w := int64(1)
		if r >= 0x10000 {
			w = 2
		}
		if done+w > n {
			return s[:i]
		}
		done += w
	}
	return s
}

// cutAt shortens s to at most max bytes at a character boundary.
func cutAt(s string, max int) string {
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}
