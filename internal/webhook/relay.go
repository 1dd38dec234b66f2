package webhook

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/store"
)

// relayBatch bounds the events one relay pass reads.
const relayBatch = 512

// cursorEvery is how often the relay writes a cursor that only moved
// over events no webhook reports (a restart reads them again, cheaply).
const cursorEvery = 10 * time.Second

// relayLoop turns the log's relevant events into deliveries, from the
// durable cursor on, whenever the log's head moves.
func (s *Service) relayLoop(cursor int64) {
	defer s.wg.Done()
	saved := cursor
	tick := time.NewTicker(cursorEvery)
	defer tick.Stop()
	failing := false
	for {
		head, moved := s.log.Head()
		var err error
		for cursor < head && err == nil {
			cursor, err = s.relay(s.ctx, cursor)
		}
		switch {
		case err != nil && s.ctx.Err() == nil:
			if !failing {
				s.lg.Error("relay events to webhooks; retrying", "err", err)
			}
			failing = true
			if !s.sleep(time.Second) {
				return
			}
			continue
		case err == nil && failing:
			s.lg.Info("relaying events to webhooks again")
			failing = false
		}
		select {
		case <-s.ctx.Done():
			s.saveCursor(cursor, saved)
			return
		case <-moved:
		case <-tick.C:
			if s.saveCursor(cursor, saved) {
				saved = cursor
			}
		}
	}
}

// relay reads one batch of the log after cursor and writes the deliveries
// its relevant events call for, with the cursor's move, in one
// transaction. It returns the new cursor.
func (s *Service) relay(ctx context.Context, cursor int64) (int64, error) {
	evs, through, err := s.log.Read(ctx, cursor, "", relayBatch)
	var gap *events.GapError
	if errors.As(err, &gap) {
		s.lg.Warn("events were pruned before they were relayed to webhooks", "after", gap.After, "first", gap.First)
		s.cfg.Metrics.Pruned(gap.First - 1 - gap.After)
		return gap.First - 1, nil
	}
	if err != nil {
		return cursor, err
	}
	items, err := s.derive(ctx, evs)
	if err != nil || len(items) == 0 {
		// Nothing to send: the cursor moves in memory, and is written
		// now and then.
		return through, err
	}
	err = s.st.Tx(ctx, func(tx store.Tx) error {
		return s.relayTx(ctx, tx.(store.WebhookTx), items, through)
	})
	if err != nil {
		return cursor, err
	}
	s.poke()
	return through, nil
}

// relayTx writes the deliveries of items that another node has not
// relayed yet, and moves the cursor to through.
func (s *Service) relayTx(ctx context.Context, tx store.WebhookTx, items []item, through int64) error {
	done, err := tx.LockWebhookCursor(ctx)
	if err != nil {
		return err
	}
	subs, err := tx.Webhooks(ctx, "")
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.ev.Seq <= done {
			continue
		}
		targets := make([]store.Delivery, 0, len(subs)+1)
		for _, w := range subs {
			if (w.SessionID == "" || w.SessionID == it.ev.SessionID) && (len(w.Events) == 0 || slices.Contains(w.Events, it.typ)) {
				targets = append(targets, store.Delivery{Target: w.ID, URL: w.URL})
			}
		}
		if it.typ == EventRunEnded {
			urls, err := tx.TakeRunCallbacks(ctx, it.runID)
			if err != nil {
				return err
			}
			for _, u := range urls {
				targets = append(targets, store.Delivery{URL: u})
			}
		}
		for _, d := range targets {
			d.ID, d.Seq, d.SessionID, d.Type = core.NewID(PrefixDelivery, false), it.ev.Seq, it.ev.SessionID, it.typ
			if d.Body, err = it.body(d.ID); err != nil {
				return err
			}
			if err := tx.InsertDelivery(ctx, d, s.cfg.RetryFor); err != nil {
				return err
			}
		}
	}
	if through > done {
		return tx.SetWebhookCursor(ctx, through)
	}
	return nil
}

// saveCursor writes the cursor when it moved past what is stored; true
// when it did.
func (s *Service) saveCursor(cursor, saved int64) bool {
	if cursor <= saved {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 5*time.Second)
	defer cancel()
	err := s.st.Tx(ctx, func(tx store.Tx) error {
		wt := tx.(store.WebhookTx)
		done, err := wt.LockWebhookCursor(ctx)
		if err != nil || done >= cursor {
			return err
		}
		return wt.SetWebhookCursor(ctx, cursor)
	})
	if err != nil {
		s.lg.Warn("save the webhook relay's cursor", "err", err)
		return false
	}
	return true
}

// Id prefixes of subscriptions and deliveries.
const (
	PrefixWebhook  = "whk"
	PrefixDelivery = "whd"
)
