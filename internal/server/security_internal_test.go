package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFailedLoginsAnsweredAtOnce: a failed login past the free ones is
// answered at once with the delay it earned as Retry-After, the failures
// that come during that delay are refused (429) without counting, the
// right password is served throughout, and once the delay has passed the
// next failure is heard and earns a longer one. Nothing waits: a failure
// used to hold its connection for its delay.
func TestFailedLoginsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	g := &guard{sec: Security{Password: "right"}, now: func() time.Time { return now }, failed: map[string]*failures{}}
	h := g.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	try := func(pass string) (int, string) {
		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		r.SetBasicAuth("opencode", pass)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("Retry-After")
	}
	for i := range loginFree {
		if code, ra := try("guess"); code != http.StatusUnauthorized || ra != "" {
			t.Fatalf("free failure %d: %d Retry-After %q", i+1, code, ra)
		}
	}
	if code, ra := try("guess"); code != http.StatusUnauthorized || ra != "1" {
		t.Errorf("the sixth failure: %d Retry-After %q, want 401 with 1 s", code, ra)
	}
	for range 3 {
		if code, ra := try("guess"); code != http.StatusTooManyRequests || ra != "1" {
			t.Errorf("a failure during the delay: %d Retry-After %q, want 429 with 1 s", code, ra)
		}
		if code, _ := try("right"); code != http.StatusOK {
			t.Errorf("the right password during the delay: %d", code)
		}
	}
	now = now.Add(150 * time.Millisecond)
	if code, ra := try("guess"); code != http.StatusUnauthorized || ra != "1" {
		t.Errorf("the seventh counted failure: %d Retry-After %q, want 401", code, ra)
	}
	// The refused ones did not count: the delay grew by one step only.
	if d := g.failed["192.0.2.7"].until.Sub(now); d != 2*loginBaseWait {
		t.Errorf("delay after seven failures = %v, want %v", d, 2*loginBaseWait)
	}
	for range 20 {
		now = now.Add(loginMaxDelay)
		try("guess")
	}
	if code, ra := try("guess"); code != http.StatusTooManyRequests || ra != "5" {
		t.Errorf("at the longest delay: %d Retry-After %q, want 429 with 5 s", code, ra)
	}
	// Another address is not slowed by this one's failures.
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "192.0.2.8:1"
	r.SetBasicAuth("opencode", "guess")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || w.Header().Get("Retry-After") != "" {
		t.Errorf("another address: %d %q", w.Code, w.Header().Get("Retry-After"))
	}
}
