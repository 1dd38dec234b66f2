package app

import (
	"context"

	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/store"
)

// stateReader is what the metrics' scrape-time gauges read: the store and
// the hub.
type stateReader struct {
	st  store.Reader
	hub *events.Hub
}

func (s stateReader) ActiveRuns(ctx context.Context) (map[[2]string]int, error) {
	runs, err := s.st.ActiveRuns(ctx, "")
	if err != nil {
		return nil, err
	}
	n := make(map[[2]string]int)
	for _, r := range runs {
		phase := r.Phase
		if phase == "" {
			phase = "none"
		}
		n[[2]string{string(r.State), string(phase)}]++
	}
	return n, nil
}

func (s stateReader) PendingPermissions(ctx context.Context) (int, error) {
	p, err := s.st.PendingPermissions(ctx, "")
	return len(p), err
}

func (s stateReader) EventLog(ctx context.Context) (int64, int64, error) {
	return s.st.EventBounds(ctx)
}
func (s stateReader) Subscribers() int { return s.hub.Subscribers() }
func (s stateReader) Delivered() int64 { return s.hub.Delivered() }
func (s stateReader) Dropped() int64   { return s.hub.Dropped() }
