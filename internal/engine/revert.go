package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/undo"
)

// Undo, redo and the diff of a session, as opencode's clients use them.
// A revert restores the files the session's steps changed from a message
// on and marks the session's revert point; the messages stay, hidden by
// clients, until a new prompt retires them (store.Tx.RetireFrom) or an
// unrevert restores the files as they were before the revert and clears
// the point. The files are reverted all or nothing, journaled and
// detached from the request, by package undo; while it runs the session
// admits nothing (ErrSessionBusy). Runs, outcomes and the event log keep
// what happened.

// ErrSessionBusy means a session has an active run or a revert in
// progress, which a revert, unrevert, shell command or prompt must not
// race.
var ErrSessionBusy = undo.ErrBusy

// Revert undoes the session from messageID on (from partID on within it,
// when set).
func (e *Engine) Revert(ctx context.Context, sessionID, messageID, partID string) (core.Session, error) {
	if e.isClosing() {
		return core.Session{}, ErrClosed
	}
	return e.undo.Revert(ctx, sessionID, messageID, partID)
}

// Unrevert brings back what the session's revert undid: the files as they
// were before it, and the messages.
func (e *Engine) Unrevert(ctx context.Context, sessionID string) (core.Session, error) {
	if e.isClosing() {
		return core.Session{}, ErrClosed
	}
	return e.undo.Unrevert(ctx, sessionID)
}

// retireReverted retires, in an admission's transaction, what the
// session's revert point hides, and clears the point: a new prompt after
// a revert drops the reverted messages for good, as opencode does.
func retireReverted(ctx context.Context, tx store.Tx, w *writer, sess *core.Session) error {
	rev := sess.Revert
	if rev == nil {
		return nil
	}
	by := "revert:" + rev.MessageID
	if rev.PartID != "" {
		by += "/" + rev.PartID
	}
	msgs, parts, err := tx.RetireFrom(ctx, sess.ID, rev.MessageID, rev.PartID, by)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for _, id := range parts {
		w.event(sess.ID, core.EventPartRemoved, map[string]string{"sessionID": sess.ID, "messageID": rev.MessageID, "partID": id})
	}
	for _, id := range msgs {
		w.event(sess.ID, core.EventMessageRemoved, map[string]string{"sessionID": sess.ID, "messageID": id})
	}
	sess.Revert = nil
	w.session(*sess)
	return w.err
}

// Fork copies a session into a new one: its messages before messageID
// (all of them without one; never those a revert point hides), with new
// ids, in one transaction. The copy has no runs: the original's stay its
// own, and the idle parts that close them are not copied. The copy's
// later prompts send the model only the copied history. owner is the API
// key the copy is made through ("" for the operator): the copy is its
// maker's, whose budget its runs spend, whoever owns the original.
func (e *Engine) Fork(ctx context.Context, sessionID, messageID, owner string) (core.Session, error) {
	var out core.Session
	err := e.st.Tx(ctx, func(tx store.Tx) error {
		src, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		msgs, err := tx.Messages(ctx, sessionID, store.MessageQuery{})
		if err != nil {
			return err
		}
		if messageID != "" && !containsMessage(msgs, messageID) {
			return fmt.Errorf("message %s in session %s: %w", messageID, sessionID, store.ErrNotFound)
		}
		now := e.now()
		fork := core.Session{ID: core.NewID(core.PrefixSession, true), ProjectID: src.ProjectID, Directory: src.Directory,
			Title: forkTitle(src.Title), Version: src.Version, Agent: src.Agent, Model: src.Model, Permission: src.Permission, Owner: owner,
			Time: core.SessionTime{Created: now, Updated: now}}
		fork.Slug = core.Slug(fork.ID)
		if err := tx.InsertSession(ctx, fork); err != nil {
			return err
		}
		w := writer{ctx: ctx, tx: tx}
		w.event(fork.ID, core.EventSessionCreated, core.SessionProps{SessionID: fork.ID, Info: fork})
		ids := map[string]string{}
		stop := messageID
		if src.Revert != nil && stop == "" {
			stop = src.Revert.MessageID
		}
		for _, m := range msgs {
			if m.Info.ID == stop || src.Revert != nil && m.Info.ID == src.Revert.MessageID {
				break
			}
			ids[m.Info.ID] = core.NewID(core.PrefixMessage, false)
		}
		for _, m := range msgs {
			newID, ok := ids[m.Info.ID]
			if !ok {
				break
			}
			info := m.Info
			info.ID, info.SessionID, info.RunID, info.Seq = newID, fork.ID, "", 0
			if p, ok := ids[info.ParentID]; ok {
				info.ParentID = p
			}
			if err := tx.InsertMessage(ctx, info); err != nil {
				return err
			}
			w.messageEvent(info)
			for _, p := range m.Parts {
				if p.Type == core.PartIdle {
					continue
				}
				p.ID, p.SessionID, p.MessageID = core.NewID(core.PrefixPart, false), fork.ID, newID
				if t, ok := ids[p.TailStart]; ok {
					p.TailStart = t
				}
				w.part(p)
			}
		}
		w.event(fork.ID, core.EventSessionForked, core.ForkedProps{SessionID: fork.ID, From: src.ID, Messages: len(ids)})
		out = fork
		return w.err
	})
	return out, err
}

func containsMessage(msgs []core.MessageWithParts, id string) bool {
	for _, m := range msgs {
		if m.Info.ID == id {
			return true
		}
	}
	return false
}

// forkTitle names a fork after its original, as opencode does.
func forkTitle(title string) string {
	base, _, _ := strings.Cut(title, " (fork")
	return base + " (fork)"
}
