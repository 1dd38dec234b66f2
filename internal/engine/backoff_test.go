package engine

import (
	"testing"
	"time"
)

// TestBackoff pins promise 7's schedule: the provider's Retry-After wins
// (bounded by the budget); otherwise exponential from Base with ±20 %
// jitter, capped at Cap.
func TestBackoff(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 6, MaxElapsed: 10 * time.Minute, Base: 2 * time.Second, Cap: 30 * time.Second}
	for attempt, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 16 * time.Second, 5: 30 * time.Second, 9: 30 * time.Second} {
		lo, hi := time.Duration(float64(want)*0.8), time.Duration(float64(want)*1.2)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := backoff(p, attempt, 0)
			if d < lo || d > hi {
				t.Fatalf("attempt %d: delay %v outside %v..%v", attempt, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("attempt %d: only %d distinct delays; no jitter", attempt, len(seen))
		}
	}
	if d := backoff(p, 1, 7*time.Second); d != 7*time.Second {
		t.Errorf("Retry-After 7s gave %v", d)
	}
	if d := backoff(p, 1, time.Hour); d != p.MaxElapsed {
		t.Errorf("Retry-After beyond the budget gave %v, want %v", d, p.MaxElapsed)
	}
}
