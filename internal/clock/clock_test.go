package clock

import (
	"testing"
	"time"
)

func TestFakeFiresInOrderAndOnlyWhenPassed(t *testing.T) {
	t.Parallel()
	start := time.Unix(1000, 0)
	f := NewFake(start)
	late, early := f.After(2*time.Second), f.After(time.Second)
	if n, _ := f.Waiting(); n != 2 {
		t.Fatalf("waiting = %d", n)
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-early:
		t.Fatal("fired before its time")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-early; !got.Equal(start.Add(time.Second)) {
		t.Errorf("early fired at %v", got)
	}
	f.Set(start) // never backwards
	if !f.Now().Equal(start.Add(time.Second)) {
		t.Errorf("now = %v", f.Now())
	}
	f.Advance(time.Hour)
	<-late
	select {
	case <-f.After(0):
	default:
		t.Error("a timer of no duration did not fire at once")
	}
	if n, _ := f.Waiting(); n != 0 {
		t.Errorf("waiting = %d after all fired", n)
	}
}
