package pty

import (
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// readAll reads everything kept from cursor from.
func readAll(r *ring, from int64) (string, int64) {
	var b strings.Builder
	for {
		s, next, _, _ := r.read(from, -1, 7)
		if s == "" {
			return b.String(), from
		}
		b.WriteString(s)
		from = next
	}
}

func units(s string) int64 { return int64(len(utf16.Encode([]rune(s)))) }

// TestRingSplitsNoCharacter: output cut inside a UTF-8 sequence waits for
// its end; cursors count UTF-16 units (an emoji is two); a read from any
// cursor starts on a character; invalid bytes become U+FFFD.
func TestRingSplitsNoCharacter(t *testing.T) {
	t.Parallel()
	r := newRing(1 << 20)
	whole := "a-é-😀-z"
	b := []byte(whole)
	for i := range b {
		r.write(b[i : i+1])
	}
	got, end := readAll(r, 0)
	if got != whole || end != units(whole) || r.cursor() != units(whole) {
		t.Fatalf("got %q to %d, want %q to %d", got, end, whole, units(whole))
	}
	// From inside the emoji's surrogate pair: the next character.
	at := units("a-é-") + 1
	if s, _ := readAll(r, at); s != "-z" {
		t.Errorf("from the middle of a pair: %q", s)
	}
	if s, _ := readAll(r, units("a-é-")); s != "😀-z" {
		t.Errorf("from the pair: %q", s)
	}
	r.write([]byte{0xff, 'x', 0xe2, 0x82})
	r.close()
	s, _ := readAll(r, end)
	if !utf8.ValidString(s) || s != "\uFFFDx\uFFFD\uFFFD" {
		t.Errorf("invalid bytes and a cut sequence at the end: %q", s)
	}
	if _, _, _, ended := r.read(r.cursor(), -1, 10); !ended {
		t.Error("a closed ring at its end does not say so")
	}
}

// TestRingIsBounded: the ring keeps the newest output within its limit,
// whole chunks at a time, merges small writes, and a read from a
// forgotten cursor starts at the oldest kept.
func TestRingIsBounded(t *testing.T) {
	t.Parallel()
	r := newRing(64 << 10)
	for range 300_000 {
		r.write([]byte("x"))
	}
	r.write([]byte("END"))
	if len(r.chunks) > (64<<10)/mergeBelow+1 {
		t.Errorf("%d chunks for one-byte writes", len(r.chunks))
	}
	got, end := readAll(r, 0)
	if len(got) > 64<<10 || len(got) < 60<<10 || !strings.HasSuffix(got, "END") || end != 300_003 {
		t.Errorf("kept %d bytes to %d", len(got), end)
	}
	s, next, _, _ := r.read(5, 300_001, 10)
	if s != "xxxxxxxxxx" || next != r.chunks[0].start+10 {
		t.Errorf("from a forgotten cursor: %q to %d, oldest kept %d", s, next, r.chunks[0].start)
	}
	if s, _, _, _ := r.read(299_999, 300_001, 100); s != "xE" {
		t.Errorf("until: %q", s)
	}
}

// TestRingWakes: a reader waiting at the end is woken by output and by
// the end of the output.
func TestRingWakes(t *testing.T) {
	t.Parallel()
	r := newRing(1024)
	_, _, wake, ended := r.read(0, -1, 10)
	if ended || wake == nil {
		t.Fatal("an empty ring has nothing to wait for")
	}
	r.write([]byte("hi"))
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("output did not wake the reader")
	}
	_, _, wake, _ = r.read(2, -1, 10)
	r.close()
	<-wake
	if _, _, _, ended := r.read(2, -1, 10); !ended {
		t.Error("the end was not reported")
	}
}

// TestTickets: a ticket opens its terminal once, within its life, and is
// spent by a try on another terminal.
func TestTickets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	tk := newTickets(time.Minute, func() time.Time { return now })
	a := tk.issue("pty_a")
	if a.ExpiresIn != 60 || len(a.Ticket) < 32 {
		t.Fatalf("ticket: %+v", a)
	}
	if !tk.consume(a.Ticket, "pty_a") || tk.consume(a.Ticket, "pty_a") {
		t.Error("a ticket did not open exactly once")
	}
	b := tk.issue("pty_a")
	if tk.consume(b.Ticket, "pty_b") || tk.consume(b.Ticket, "pty_a") {
		t.Error("a ticket tried on another terminal stayed valid")
	}
	c := tk.issue("pty_a")
	now = now.Add(time.Minute)
	if tk.consume(c.Ticket, "pty_a") {
		t.Error("an expired ticket opened")
	}
	d := tk.issue("pty_a")
	tk.forget("pty_a")
	if tk.consume(d.Ticket, "pty_a") {
		t.Error("a removed terminal's ticket opened")
	}
	for range maxTickets + 10 {
		tk.issue("pty_x")
	}
	if len(tk.byID) > maxTickets {
		t.Errorf("%d tickets kept", len(tk.byID))
	}
}
