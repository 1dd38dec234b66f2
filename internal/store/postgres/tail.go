package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/core"

	"github.com/jackc/pgx/v5"
)

// tailer follows the event log: every node hands the hook what the log
// holds after the last seq it handed, in order, whoever wrote it. Each
// cycle first runs a sequencer pass, which numbers the events committed
// into the inbox so far (any node's; one pass at a time in the cluster),
// then reads the log. A local commit kicks it at once, a NOTIFY from
// another node kicks it, and a poll catches anything a lost notification
// missed.
type tailer struct {
	mu      sync.Mutex
	head    int64         // the last seq handed to the hook
	started int64         // cycles begun
	done    int64         // the last cycle that numbered what had committed before it began, and read it
	moved   chan struct{} // closed (and replaced) when done moves
	stopped bool
	kick    chan struct{}
	notify  chan struct{}
	readErr bool
	// mine are the seqs of the batch the hook is being handed that this
	// process committed (Committed).
	mine map[int64]bool
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
	return t.stopped
}

func (t *tailer) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		close(t.moved)
	}
}

// next returns the first cycle that will begin after the call: called
// after a commit, the cycle it names finds that commit's events.
func (t *tailer) next() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started + 1
}

// begin numbers a new cycle.
func (t *tailer) begin() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started++
	return t.started
}

// handed records that the hook has seen the log up to seq.
func (t *tailer) handed(seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.head = max(t.head, seq)
}

// finish records that cycle has handed the hook everything committed
// before it began.
func (t *tailer) finish(cycle int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cycle <= t.done || t.stopped {
		return
	}
	t.done = cycle
	close(t.moved)
	t.moved = make(chan struct{})
}

// wait returns once a cycle numbered cycle or later has finished, so that
// a transaction's events are published when Tx returns, as they are on
// SQLite. The transaction has committed whatever happens here: when ctx
// ends first or the store closes, the events are published later (or
// read by the next start), and wait still reports success.
func (t *tailer) wait(ctx context.Context, cycle int64) error {
	for {
		t.mu.Lock()
		if t.done >= cycle || t.stopped {
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
	s.kickTail()
	s.hint()
}

// kickTail starts a cycle of this node's tail (coalesced). After a commit
// it is all a node does: the other nodes hear of the events once its pass
// has numbered them (cycle), so that they read them rather than race that
// pass with their own. Should this node die in between, their poll
// numbers them.
func (s *Store) kickTail() {
	select {
	case s.tail.kick <- struct{}{}:
	default:
	}
}

// hint tells the other nodes that the log or its inbox has grown
// (coalesced).
func (s *Store) hint() {
	select {
	case s.tail.notify <- struct{}{}:
	default:
	}
}

// readBatch bounds one read of the log by the tail.
const readBatch = 1000

// busyRetry is how soon a cycle whose pass found another node's pass
// running tries again: that pass may have begun before this node's
// latest commit, and a pass takes a few milliseconds.
const busyRetry = 2 * time.Millisecond

func (s *Store) tailLoop(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.poll)
	defer tick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.tail.kick:
		case <-tick.C:
		case <-retry.C:
		}
		if s.cycle(ctx) {
			retry.Reset(busyRetry)
		}
	}
}

// cycle numbers what has committed (one pass) and hands the hook the log
// after the tail's head. It reports whether the pass must be tried again.
func (s *Store) cycle(ctx context.Context) (again bool) {
	id := s.tail.begin()
	moved, busy, head, err := s.sequence(ctx)
	if err != nil {
		s.readFailed(ctx, err)
		return false
	}
	if moved > 0 {
		// The other nodes read what this pass numbered.
		s.hint()
	}
	if !s.readTail(ctx, head) {
		return false
	}
	if busy {
		return true
	}
	s.tail.finish(id)
	return false
}

// sequence runs one sequencer pass (migration 0013).
func (s *Store) sequence(ctx context.Context) (moved int64, busy bool, head int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT moved, busy, head FROM agentd_sequence_events()`).Scan(&moved, &busy, &head)
	if err != nil {
		return 0, false, 0, fmt.Errorf("number events: %w", err)
	}
	return moved, busy, head, nil
}

// readFailed reports a failed read of the log once per outage; the poll
// tries again.
func (s *Store) readFailed(ctx context.Context, err error) {
	if ctx.Err() == nil && !s.tail.readErr {
		s.tail.readErr = true
		s.log.Warn("read event log", "err", err)
	}
}

// readTail hands the hook everything after the tail's head, at least up
// to through; it reports whether it read that far.
func (s *Store) readTail(ctx context.Context, through int64) bool {
	for ctx.Err() == nil {
		s.tail.mu.Lock()
		after := s.tail.head
		s.tail.mu.Unlock()
		evs, mine, err := s.readLog(ctx, after)
		if err != nil {
			s.readFailed(ctx, err)
			return false
		}
		if s.tail.readErr {
			s.tail.readErr = false
			s.log.Info("event log readable again")
		}
		if len(evs) == 0 {
			// Up to date (or what lay before through was pruned).
			return true
		}
		s.hookMu.Lock()
		hook := s.hook
		s.hookMu.Unlock()
		s.tail.mu.Lock()
		s.tail.mine = mine
		s.tail.mu.Unlock()
		if hook != nil {
			hook(evs)
		}
		s.tail.mu.Lock()
		s.tail.mine = nil
		s.tail.mu.Unlock()
		last := evs[len(evs)-1].Seq
		s.tail.handed(last)
		if last >= through && len(evs) < readBatch {
			return true
		}
	}
	return false
}

// readLog reads the log after seq after, as Events does, and which of
// its events this process committed.
func (s *Store) readLog(ctx context.Context, after int64) ([]core.Event, map[int64]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, session_id, type, time_ms, data, origin IS NOT DISTINCT FROM $2
		FROM events WHERE seq > $1 ORDER BY seq LIMIT $3`, after, s.origin, readBatch)
	if err != nil {
		return nil, nil, fmt.Errorf("read event log: %w", storageError(err))
	}
	defer rows.Close()
	var evs []core.Event
	mine := map[int64]bool{}
	size := 0
	for rows.Next() {
		var ev core.Event
		var data string
		var own bool
		if err := rows.Scan(&ev.Seq, &ev.SessionID, &ev.Type, &ev.Time, &data, &own); err != nil {
			return nil, nil, fmt.Errorf("read event log: %w", err)
		}
		ev.Properties, ev.ID = json.RawMessage(data), core.DurableEventID(ev.Seq)
		evs = append(evs, ev)
		if own {
			mine[ev.Seq] = true
		}
		if size += len(data); size >= 4<<20 {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read event log: %w", storageError(err))
	}
	return evs, mine, nil
}

// Committed reports whether this process committed the event of seq, for
// the hook to ask about the events it is handed: each event of the log is
// committed by one node, so work done for an event once across a cluster
// (opencode plugins' event hook) is done by the node that committed it.
func (s *Store) Committed(seq int64) bool {
	s.tail.mu.Lock()
	defer s.tail.mu.Unlock()
	return s.tail.mine[seq]
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
	s.kickCreds() // a change's notice may have been lost meanwhile
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
		if strings.HasPrefix(n.Payload, "creds ") {
			if n.Payload != credsPayload(s.node) {
				s.kickCreds()
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
