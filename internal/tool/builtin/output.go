package builtin

import (
	"fmt"
	"sync"
	"time"
)

// What a bash call keeps of its output: the first and the last bytes (a
// long build log ends with what went wrong), in bounded memory.
const (
	bashHeadCap   = 5 << 20
	bashTailCap   = 5 << 20
	bashOutputCap = bashHeadCap + bashTailCap
)

// Live output: at most this often, and at most the last metadataOutput
// bytes (as opencode keeps in a bash call's metadata).
const (
	progressEvery  = 250 * time.Millisecond
	metadataOutput = 30_000
)

// capped keeps the first headCap bytes written to it and the last tailCap
// of the rest, and shows the output so far to progress at most every
// progressEvery.
type capped struct {
	mu       sync.Mutex
	headCap  int
	head     []byte
	tail     ring
	total    int64
	progress func(string)
	shown    time.Time
}

func newCapped(headCap, tailCap int) *capped {
	return &capped{headCap: headCap, tail: ring{max: tailCap}}
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail.write(p)
	if c.progress != nil && time.Since(c.shown) >= progressEvery {
		c.shown = time.Now()
		c.progress(tail(c.lastLocked(metadataOutput+1), metadataOutput))
	}
	return n, nil
}

// cut is how many bytes were dropped between the head and the tail.
func (c *capped) cut() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - int64(len(c.head)) - int64(c.tail.len())
}

// String is what was kept: the head, a line saying how much was cut if
// anything was, and the tail.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := c.total - int64(len(c.head)) - int64(c.tail.len())
	if cut == 0 {
		return string(c.head) + string(c.tail.bytes())
	}
	return string(c.head) + fmt.Sprintf("\n… %d bytes of output cut here …\n", cut) + string(c.tail.bytes())
}

// last is the last n bytes kept.
func (c *capped) last(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastLocked(n)
}

func (c *capped) lastLocked(n int) string {
	t := c.tail.bytes()
	if len(t) >= n {
		return string(t[len(t)-n:])
	}
	h := c.head[max(len(c.head)-(n-len(t)), 0):]
	return string(h) + string(t)
}

// ring keeps the last max bytes written to it; its buffer grows to max
// and then wraps.
type ring struct {
	max  int
	buf  []byte
	next int // where the next byte goes once buf is full
}

func (r *ring) write(p []byte) {
	if len(p) >= r.max {
		r.buf = append(r.buf[:0], p[len(p)-r.max:]...)
		r.next = 0
		return
	}
	if room := r.max - len(r.buf); room > 0 {
		k := min(room, len(p))
		r.buf = append(r.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(r.buf[r.next:], p)
		p = p[k:]
		r.next = (r.next + k) % r.max
	}
}

func (r *ring) len() int { return len(r.buf) }

// bytes returns the kept bytes in the order they were written.
func (r *ring) bytes() []byte {
	if len(r.buf) < r.max || r.next == 0 {
		return r.buf
	}
	out := make([]byte, 0, len(r.buf))
	return append(append(out, r.buf[r.next:]...), r.buf[:r.next]...)
}
