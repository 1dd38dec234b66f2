package events

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestWaitDeliveredWaitsForStreamsFindingTheirPlace: a stream that has
// subscribed but not yet read the log (its request reached the server
// just before the prompt's answer) is waited for until it has sent the
// log up to the seq, or has closed; a stream that closes releases the
// wait at once.
func TestWaitDeliveredWaitsForStreamsFindingTheirPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub(&logReader{}, 0, 16)
		h.Publish(mkEvents(1, 5))
		wait := func() *atomic.Bool {
			var done atomic.Bool
			go func() {
				h.WaitDelivered(context.Background(), 5, time.Minute)
				done.Store(true)
			}()
			synctest.Wait()
			return &done
		}

		sub := h.Subscribe("")
		done := wait()
		if done.Load() {
			t.Fatal("WaitDelivered returned before the new stream sent anything")
		}
		sub.Delivered(3)
		synctest.Wait()
		if done.Load() {
			t.Fatal("WaitDelivered returned before the stream reached the seq")
		}
		sub.Delivered(5)
		synctest.Wait()
		if !done.Load() {
			t.Fatal("WaitDelivered still waits for a stream that sent everything")
		}
		sub.Close()

		other := h.Subscribe("ses_1")
		done = wait()
		other.Close()
		synctest.Wait()
		if !done.Load() {
			t.Fatal("WaitDelivered still waits for a stream that closed")
		}
	})
}
