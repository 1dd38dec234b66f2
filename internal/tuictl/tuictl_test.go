package tuictl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/tuictl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func req(i int) tuictl.Request {
	return tuictl.Request{Path: "/tui/show-toast", Body: json.RawMessage(fmt.Sprintf(`{"message":"m%d"}`, i))}
}

// TestOrderAndOnePollerEach: requests come out in order, each to one
// poller; a poller waiting on an empty queue gets the next one pushed.
func TestOrderAndOnePollerEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := tuictl.New(0, 0, nil)
		q.Push(req(1))
		q.Push(req(2))
		for i := 1; i <= 2; i++ {
			r, err := q.Next(t.Context())
			if err != nil || string(r.Body) != fmt.Sprintf(`{"message":"m%d"}`, i) {
				t.Fatalf("next %d = %s, %v", i, r.Body, err)
			}
		}
		got := make(chan tuictl.Request, 2)
		for range 2 {
			go func() {
				r, err := q.Next(t.Context())
				if err == nil {
					got <- r
				}
			}()
		}
		synctest.Wait()
		q.Push(req(3))
		synctest.Wait()
		if len(got) != 1 {
			t.Fatalf("%d pollers got the one request, want 1", len(got))
		}
		q.Push(req(4))
		synctest.Wait()
		if len(got) != 2 {
			t.Fatalf("the second poller got nothing")
		}
	})
}

// TestNextEndsWithContext: a poller that gives up gets its context's
// error, and nothing is lost.
func TestNextEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := tuictl.New(0, 0, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if _, err := q.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("next on an empty queue = %v, want the deadline", err)
		}
		q.Push(req(1))
		if q.Len() != 1 {
			t.Fatalf("len = %d", q.Len())
		}
	})
}

// TestBounds: a full queue drops its oldest request; a request older
// than the TTL is dropped when read.
func TestBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := tuictl.New(3, time.Minute, nil)
		for i := 1; i <= 5; i++ {
			q.Push(req(i))
		}
		if q.Len() != 3 || q.Dropped() != 2 {
			t.Fatalf("len %d dropped %d, want 3 and 2", q.Len(), q.Dropped())
		}
		r, _ := q.Next(t.Context())
		if string(r.Body) != `{"message":"m3"}` {
			t.Fatalf("oldest kept = %s, want m3", r.Body)
		}
		time.Sleep(2 * time.Minute)
		q.Push(req(6))
		r, _ = q.Next(t.Context())
		if string(r.Body) != `{"message":"m6"}` || q.Dropped() != 4 {
			t.Fatalf("after the TTL: next %s, dropped %d; want m6 and 4", r.Body, q.Dropped())
		}
	})
}
