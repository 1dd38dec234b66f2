package main

import (
	"context"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// stdinReader reads the user's answers from a terminal on one goroutine,
// a line or a single key at a time. A blocked read cannot be cancelled:
// one left pending when the run ends is answered by nobody, and close
// puts the terminal back as it was.
type stdinReader struct {
	in      *os.File
	req     chan bool // true: one key
	out     chan string
	pending bool

	mu    sync.Mutex
	saved *unix.Termios // the terminal's settings while a key is read
}

func newStdinReader(in *os.File) *stdinReader {
	r := &stdinReader{in: in, req: make(chan bool, 1), out: make(chan string, 1)}
	go r.loop()
	return r
}

func (r *stdinReader) loop() {
	defer close(r.out)
	for key := range r.req {
		var s string
		var err error
		if key {
			s, err = r.key()
		} else {
			s, err = r.line()
		}
		if err != nil {
			return
		}
		r.out <- s
	}
}

// read returns the next line (or key); ok is false at the end of input or
// when done closes first.
func (r *stdinReader) read(ctx context.Context, done <-chan struct{}, key bool) (string, bool) {
	if !r.pending {
		r.pending = true
		r.req <- key
	}
	select {
	case s, ok := <-r.out:
		r.pending = false
		return strings.TrimSpace(s), ok
	case <-done:
	case <-ctx.Done():
	}
	return "", false
}

// line reads up to a newline: the terminal's own line editing applies.
func (r *stdinReader) line() (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := r.in.Read(buf)
		if n > 0 {
			if buf[0] == '\n' {
				return b.String(), nil
			}
			b.WriteByte(buf[0])
		}
		if err == io.EOF && b.Len() > 0 {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// key reads one key without waiting for Enter: the terminal leaves line
// mode (and echo) for that read; spaces and newlines typed before are
// skipped, and the rest of what came with the key is dropped. Ctrl-D is
// the end of input. Signals still work (Ctrl-C).
func (r *stdinReader) key() (string, error) {
	fd := int(r.in.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return r.line()
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	r.mu.Lock()
	r.saved = old
	r.mu.Unlock()
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return r.line()
	}
	defer r.restore()
	buf := make([]byte, 64)
	for {
		n, err := r.in.Read(buf)
		for _, c := range buf[:n] {
			switch {
			case c == 4: // Ctrl-D
				return "", io.EOF
			case c > ' ':
				return string(c), nil
			}
		}
		if err != nil {
			return "", err
		}
	}
}

// restore puts the terminal back as it was before a key read; it is safe
// to call at any time, and more than once.
func (r *stdinReader) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.saved != nil {
		_ = unix.IoctlSetTermios(int(r.in.Fd()), unix.TCSETS, r.saved)
		r.saved = nil
	}
}
