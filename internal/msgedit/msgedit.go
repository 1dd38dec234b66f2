// Package msgedit deletes a session's messages and parts and changes its
// parts on a client's request (opencode's DELETE message, PATCH and DELETE
// part), without rewriting what happened: a deleted message or part stays
// in the store as a tombstone no read returns, like the messages a revert
// retires; a changed part keeps its former version as a tombstone; runs,
// their outcomes and the event log are left as they are. Nothing is
// changed while the session has a run that is not over (the run reads
// the history), a revert of its files in progress, or an undo point (the
// messages after it wait for a redo or the next prompt).
//
// Only what a user wrote or read can change: the text of a text or
// reasoning part. The parts that record the runs' steps (step-start,
// step-finish, patch, compaction, idle) cannot be deleted one by one: undo
// and the record of how each run ended depend on them.
package msgedit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
)

// BusyError means the session cannot change now; Reason says why.
type BusyError struct {
	SessionID string
	Reason    string
}

func (e *BusyError) Error() string { return "session " + e.SessionID + " is busy: " + e.Reason }

// RefusedError means the change asked for is not one a client may make.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// guard locks the session and returns it, or why it cannot change now.
func guard(ctx context.Context, tx store.Tx, sessionID string) (core.Session, error) {
	if err := tx.LockSession(ctx, sessionID); err != nil {
		return core.Session{}, err
	}
	sess, err := tx.Session(ctx, sessionID)
	if err != nil {
		return sess, fmt.Errorf("session %s: %w", sessionID, err)
	}
	runs, err := tx.ActiveRuns(ctx, sessionID)
	if err != nil {
		return sess, err
	}
	if len(runs) > 0 {
		return sess, &BusyError{SessionID: sessionID, Reason: fmt.Sprintf("run %s is %s and reads the history; wait for it to end or abort it", runs[0].ID, runs[0].State)}
	}
	switch _, err := tx.RevertJournal(ctx, sessionID); {
	case err == nil:
		return sess, &BusyError{SessionID: sessionID, Reason: "a revert of its files is in progress"}
	case !errors.Is(err, store.ErrNotFound):
		return sess, err
	}
	if sess.Revert != nil {
		return sess, &BusyError{SessionID: sessionID, Reason: "it has an undo point (message " + sess.Revert.MessageID + "); redo it (unrevert) or send a prompt first"}
	}
	return sess, nil
}

// part returns a live part of a live message of the session.
func part(ctx context.Context, tx store.Tx, sessionID, messageID, partID string) (core.Part, error) {
	m, err := tx.Message(ctx, sessionID, messageID)
	if err != nil {
		return core.Part{}, fmt.Errorf("message %s: %w", messageID, err)
	}
	for _, p := range m.Parts {
		if p.ID == partID {
			return p, nil
		}
	}
	return core.Part{}, fmt.Errorf("part %s of message %s: %w", partID, messageID, store.ErrNotFound)
}

// DeleteMessage retires a message of the session with its parts and
// announces message.removed.
func DeleteMessage(ctx context.Context, st store.Store, sessionID, messageID string) error {
	return st.Tx(ctx, func(tx store.Tx) error {
		if _, err := guard(ctx, tx, sessionID); err != nil {
			return err
		}
		if _, err := tx.RetireMessage(ctx, sessionID, messageID); err != nil {
			return fmt.Errorf("message %s: %w", messageID, err)
		}
		return tx.AppendEvent(ctx, core.MustEvent(sessionID, core.EventMessageRemoved,
			map[string]string{"sessionID": sessionID, "messageID": messageID}))
	})
}

// kept are the part types that record a run's steps.
var kept = map[core.PartType]string{
	core.PartStepStart:  "a step's start (its snapshot, which undo restores from)",
	core.PartStepFinish: "a step's end (its snapshot, tokens and cost)",
	core.PartPatch:      "the files a step changed (undo restores them from it)",
	core.PartCompaction: "a compaction of the history",
	core.PartIdle:       "how a run ended",
}

// DeletePart retires one part of a message and announces
// message.part.removed.
func DeletePart(ctx context.Context, st store.Store, sessionID, messageID, partID string) error {
	return st.Tx(ctx, func(tx store.Tx) error {
		if _, err := guard(ctx, tx, sessionID); err != nil {
			return err
		}
		p, err := part(ctx, tx, sessionID, messageID, partID)
		if err != nil {
			return err
		}
		if what, ok := kept[p.Type]; ok {
			return &RefusedError{Msg: fmt.Sprintf("part %s is a %s part: it records %s and cannot be deleted alone; delete its message instead", partID, p.Type, what)}
		}
		if err := tx.RetirePart(ctx, sessionID, messageID, partID); err != nil {
			return fmt.Errorf("part %s: %w", partID, err)
		}
		return tx.AppendEvent(ctx, core.MustEvent(sessionID, core.EventPartRemoved,
			map[string]string{"sessionID": sessionID, "messageID": messageID, "partID": partID}))
	})
}

// UpdatePart changes the text of a text or reasoning part to in's, keeps
// its former version as a tombstone and announces message.part.updated.
// in names the part (its id, message and session) and must have the
// stored part's type; its other fields are not taken. It returns the part
// as stored now.
func UpdatePart(ctx context.Context, st store.Store, in core.Part) (core.Part, error) {
	var out core.Part
	err := st.Tx(ctx, func(tx store.Tx) error {
		if _, err := guard(ctx, tx, in.SessionID); err != nil {
			return err
		}
		p, err := part(ctx, tx, in.SessionID, in.MessageID, in.ID)
		if err != nil {
			return err
		}
		if p.Type != core.PartText && p.Type != core.PartReasoning {
			return &RefusedError{Msg: fmt.Sprintf("part %s is a %s part: only the text of a text or reasoning part can be changed", p.ID, p.Type)}
		}
		if in.Type != p.Type {
			return &RefusedError{Msg: fmt.Sprintf("part %s is a %s part; a change cannot make it a %q part", p.ID, p.Type, in.Type)}
		}
		if err := tx.KeepPart(ctx, p.SessionID, p.MessageID, p.ID, core.NewID(core.PrefixPart, false)); err != nil {
			return fmt.Errorf("part %s: %w", p.ID, err)
		}
		p.Text = in.Text
		if err := tx.PutPart(ctx, p); err != nil {
			return err
		}
		out = p
		return tx.AppendEvent(ctx, core.MustEvent(p.SessionID, core.EventPartUpdated,
			core.PartProps{SessionID: p.SessionID, Part: p, Time: time.Now().UnixMilli()}))
	})
	return out, err
}
