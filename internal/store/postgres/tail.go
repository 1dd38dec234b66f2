package postgres

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"

	"github.com/jackc/pgx/v5"
)

// tailer follows the event log: every node hands the hook what the log
// holds after the last seq it handed, in order, whoever wrote it. A local
// commit kicks it at once, a NOTIFY from another node kicks it, and a poll
// catches anything a lost notification missed.
type tailer struct {
	mu      sync.Mutex
	head    int64
	moved   chan struct{} // closed (and replaced) when head moves
	done    bool
	kick    chan struct{}
	notify  chan struct{}
	readErr bool
	// mine are the ranges of seqs this node's transactions appended that
	// the hook has not seen yet (see Committed).
	mine [][2]int64
}

func (t *tailer) init(head int64) {
	t.head = head
	t.moved = make(chan struct{})
	t.kick = make(chan struct{}, 1)
	t.notify = make(chan struct{}, 1)
}

func (t *tailer) closed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

func (t *tailer) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.done = true
		close(t.moved)
	}
}

// advance records that the hook has seen the log up to seq.
func (t *tailer) advance(seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq <= t.head || t.done {
		return
	}
	t.head = seq
	t.mine = slices.DeleteFunc(t.mine, func(r [2]int64) bool { return r[1] <= seq })
	close(t.moved)
	t.moved = make(chan struct{})
}

// claim records seqs first to last as appended by this node, before the
// transaction commits (the tail may hand them to the hook before Commit
// returns); unclaim drops them again when the commit failed.
func (t *tailer) claim(first, last int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mine = append(t.mine, [2]int64{first, last})
}

func (t *tailer) unclaim(first, last int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mine = slices.DeleteFunc(t.mine, func(r [2]int64) bool { return r == [2]int64{first, last} })
}

// Committed reports whether this node committed the event of seq, for
// the hook to ask about the events it is handed: each event of the log
// is committed by one node, so work done for an event once across a
// cluster (opencode plugins' event hook) is done by the node that
// committed it. A commit that failed with its outcome unknown (the
// connection lost) counts as not this node's.
func (s *Store) Committed(seq int64) bool {
	s.tail.mu.Lock()
	defer s.tail.mu.Unlock()
	for _, r := range s.tail.mine {
		if seq >= r[0] && seq <= r[1] {
			return true
		}
	}
	return false
}

// wait returns once the hook has seen seq, so that a transaction's events
// are published when Tx returns, as they are on SQLite. The transaction has
// committed whatever happens here: when ctx ends first or the store closes,
// the events are published later (or read by the next start), and wait
// still reports success.
func (t *tailer) wait(ctx context.Context, seq int64) error {
	for {
		t.mu.Lock()
		if t.head >= seq || t.done {
			t.mu.Unlock()
			return nil
		}
		ch := t.moved
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// wake kicks this node's tail and tells the other nodes (coalesced).
func (s *Store) wake() {
	select {
	case s.tail.kick <- struct{}{}:
	default:
	}
	select {
	case s.tail.notify <- struct{}{}:
	default:
	}
}

// readBatch bounds one read of the log by the tail.
const readBatch = 1000

func (s *Store) tailLoop(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.tail.kick:
		case <-tick.C:
		}
		s.readTail(ctx)
	}
}

// readTail hands the hook everything after the tail's head.
func (s *Store) readTail(ctx context.Context) {
	for ctx.Err() == nil {
		s.tail.mu.Lock()
		after := s.tail.head
		s.tail.mu.Unlock()
		evs, err := s.Events(ctx, store.EventQuery{After: after, Limit: readBatch, MaxBytes: 4 << 20})
		if err != nil {
			// The poll tries again; say so once per outage.
			if ctx.Err() == nil && !s.tail.readErr {
				s.tail.readErr = true
				s.log.Warn("read event log", "err", err)
			}
			return
		}
		if s.tail.readErr {
			s.tail.readErr = false
			s.log.Info("event log readable again")
		}
		if len(evs) == 0 {
			return
		}
		s.hookMu.Lock()
		hook := s.hook
		s.hookMu.Unlock()
		if hook != nil {
			hook(evs)
		}
		s.tail.advance(evs[len(evs)-1].Seq)
		if len(evs) < readBatch {
			return
		}
	}
}

// notifyLoop sends the wake-up hint after local commits: one NOTIFY stands
// for all the commits made while the previous one was being sent. It is
// sent outside the transactions (a NOTIFY inside one serialises commits).
func (s *Store) notifyLoop(ctx context.Context) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.tail.notify:
		}
		// A failed hint costs the other nodes a poll interval, no more.
		_, _ = s.db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, s.channel, s.wakePayload())
	}
}

// listenLoop keeps one connection listening for other nodes' hints and
// abort requests, reconnecting with a capped backoff; after each
// (re)connect it reads the log, since hints sent meanwhile are lost.
func (s *Store) listenLoop(ctx context.Context) {
	defer s.wg.Done()
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := s.listen(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("listen for other nodes", "err", err, "retry", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			delay = min(delay*2, 5*time.Second)
			continue
		}
		delay = 100 * time.Millisecond
	}
}

func (s *Store) listen(ctx context.Context) error {
	cfg := s.connCfg.Copy()
	cfg.RuntimeParams["application_name"] = s.app
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	s.listenOnce.Do(func() { close(s.listening) })
	select {
	case s.tail.kick <- struct{}{}:
	default:
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if runID, reason, ok := strings.Cut(strings.TrimPrefix(n.Payload, "abort "), " "); ok && strings.HasPrefix(n.Payload, "abort ") {
			s.hookMu.Lock()
			fn := s.abortFn
			s.hookMu.Unlock()
			if fn != nil {
				fn(runID, core.EndReason(reason))
			}
			continue
		}
		if n.Payload == s.wakePayload() {
			// This node's own hint: its commits kicked its tail already.
			continue
		}
		select {
		case s.tail.kick <- struct{}{}:
		default:
		}
	}
}

// wakePayload is the hint this node sends after its commits; it names the
// node so that the node can ignore its own.
func (s *Store) wakePayload() string { return "wake " + s.node }
