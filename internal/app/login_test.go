package app_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
)

// TestFailedLoginsDoNotFillTheCap: with a small connection cap, a burst
// of wrong passwords from one address does not keep the right password
// from being served. Failed logins used to wait out their delay on their
// connections, so a few of them held every place and the owner got 503
// for as long as the delays ran.
func TestFailedLoginsDoNotFillTheCap(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) {
		c.MaxConns = 4
		c.Security.Password = "right"
	})
	url := n.app.URL() + "/global/health"
	// A connection per request, as a guesser would: nothing is kept open
	// after an answer.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute}
	t.Cleanup(hc.CloseIdleConnections)
	login := func(pass string) (int, error) {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
		if pass != "" {
			req.SetBasicAuth("opencode", pass)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Earn the longest delay (5 s): the free failures, then six more.
	for range 11 {
		login("guess")
	}
	// More wrong passwords at once than there are places, each tried
	// until the server hears it (not refused at the cap).
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if code, err := login("guess"); err != nil || code != http.StatusServiceUnavailable {
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Once they have been answered, or hold every place (a request
	// without credentials finds none), the right password must be
	// served within 3 s, whereas waiting out their delays (5 s each, one
	// address's waits taking turns) held every place for 5 s and three
	// of them for 20.
	for full := false; !full; {
		select {
		case <-done:
			full = true
		default:
			code, err := login("")
			full = err == nil && code == http.StatusServiceUnavailable
			time.Sleep(10 * time.Millisecond)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	var codes []int
	for {
		code, err := login("right")
		if err == nil && code == http.StatusOK {
			break
		}
		codes = append(codes, code)
		if time.Now().After(deadline) {
			t.Errorf("the right password was not served while wrong ones waited: %v", codes[max(0, len(codes)-5):])
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
}
