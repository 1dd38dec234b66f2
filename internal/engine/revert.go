package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
)

// Undo, redo and the diff of a session, as opencode's clients use them.
// A revert restores the files the session's steps changed from a message
// on (from the snapshots their patch parts name) and marks the session's
// revert point; the messages stay, hidden by clients, until a new prompt
// retires them (store.Tx.RetireFrom) or an unrevert restores the files as
// they were before the revert and clears the point. Runs, outcomes and the
// event log keep what happened.

// ErrSessionBusy means a session has an active run, which a revert,
// unrevert or shell command must not race.
var ErrSessionBusy = errors.New("session is busy")

// Revert undoes the session from messageID on (from partID on within it,
// when set).
func (e *Engine) Revert(ctx context.Context, sessionID, messageID, partID string) (core.Session, error) {
	sess, err := e.idleSession(ctx, sessionID)
	if err != nil {
		return sess, err
	}
	msgs, err := e.st.Messages(ctx, sessionID, store.MessageQuery{})
	if err != nil {
		return sess, err
	}
	patches, found := patchesFrom(msgs, messageID, partID)
	if !found {
		what := "message " + messageID
		if partID != "" {
			what = "part " + partID + " of message " + messageID
		}
		return sess, fmt.Errorf("%s in session %s: %w", what, sessionID, store.ErrNotFound)
	}
	rev := core.SessionRevert{MessageID: messageID, PartID: partID}
	files := restoreOrder(patches)
	if len(files) > 0 || sess.Revert != nil {
		snaps := e.cfg.Snapshots
		if !snaps.Enabled() {
			return sess, &InputError{"revert: " + snapshot.ErrUnavailable.Error()}
		}
		// The state before any revert is what an unrevert goes back to.
		if sess.Revert != nil {
			rev.Snapshot = sess.Revert.Snapshot
		}
		if rev.Snapshot == "" {
			if rev.Snapshot, err = snaps.Track(ctx, sess.Directory); err != nil {
				return sess, fmt.Errorf("snapshot before revert: %w", err)
			}
		}
		if sess.Revert != nil {
			// Another revert point: back to the state before the first,
			// then undo from the new point.
			if err := snaps.Restore(ctx, sess.Directory, rev.Snapshot, e.revertedFiles(msgs, *sess.Revert)); err != nil {
				return sess, fmt.Errorf("undo the earlier revert: %w", err)
			}
		}
		for _, f := range files {
			if err := snaps.Restore(ctx, sess.Directory, f.hash, []string{f.path}); err != nil {
				return sess, fmt.Errorf("restore %s: %w", f.path, err)
			}
		}
		now, err := snaps.Track(ctx, sess.Directory)
		if err == nil {
			rev.Diff = joinPatches(ctx, snaps, sess.Directory, rev.Snapshot, now)
		}
	}
	return e.setRevert(ctx, sessionID, &rev)
}

// Unrevert brings back what the session's revert undid: the files as they
// were before it, and the messages.
func (e *Engine) Unrevert(ctx context.Context, sessionID string) (core.Session, error) {
	sess, err := e.idleSession(ctx, sessionID)
	if err != nil || sess.Revert == nil {
		return sess, err
	}
	if sess.Revert.Snapshot != "" {
		msgs, err := e.st.Messages(ctx, sessionID, store.MessageQuery{})
		if err != nil {
			return sess, err
		}
		if err := e.cfg.Snapshots.Restore(ctx, sess.Directory, sess.Revert.Snapshot, e.revertedFiles(msgs, *sess.Revert)); err != nil {
			return sess, fmt.Errorf("unrevert: %w", err)
		}
	}
	return e.setRevert(ctx, sessionID, nil)
}

// idleSession returns the session, or ErrSessionBusy while it has an
// active run.
func (e *Engine) idleSession(ctx context.Context, sessionID string) (core.Session, error) {
	sess, err := e.st.Session(ctx, sessionID)
	if err != nil {
		return sess, err
	}
	active, err := e.st.ActiveRuns(ctx, sessionID)
	if err != nil {
		return sess, err
	}
	if len(active) > 0 {
		return sess, ErrSessionBusy
	}
	return sess, nil
}

// setRevert writes the session's revert point (nil clears it), refusing
// when a run started meanwhile.
func (e *Engine) setRevert(ctx context.Context, sessionID string, rev *core.SessionRevert) (core.Session, error) {
	var out core.Session
	err := e.st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.LockSession(ctx, sessionID); err != nil {
			return err
		}
		active, err := tx.ActiveRuns(ctx, sessionID)
		if err != nil {
			return err
		}
		if len(active) > 0 {
			return ErrSessionBusy
		}
		sess, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		sess.Revert = rev
		sess.Time.Updated = e.now()
		w := writer{ctx: ctx, tx: tx}
		w.session(sess)
		out = sess
		return w.err
	})
	return out, err
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

// restore is one file to put back, and the snapshot it is put back from.
type restore struct{ path, hash string }

// patchesFrom returns the patch parts of the session from messageID on
// (from partID on within it), and whether that point exists.
func patchesFrom(msgs []core.MessageWithParts, messageID, partID string) ([]core.Part, bool) {
	var out []core.Part
	found := false
	for _, m := range msgs {
		if m.Info.ID == messageID {
			found = partID == ""
		}
		for _, p := range m.Parts {
			if m.Info.ID == messageID && p.ID == partID {
				found = true
			}
			if found && p.Type == core.PartPatch {
				out = append(out, p)
			}
		}
	}
	return out, found
}

// restoreOrder lists each file the patches changed once, with the
// snapshot of its first change: the state before the reverted steps.
func restoreOrder(patches []core.Part) []restore {
	seen := map[string]bool{}
	var out []restore
	for _, p := range patches {
		for _, f := range p.Files {
			if !seen[f] {
				seen[f] = true
				out = append(out, restore{f, p.Hash})
			}
		}
	}
	return out
}

// revertedFiles are the files a revert point undid.
func (e *Engine) revertedFiles(msgs []core.MessageWithParts, rev core.SessionRevert) []string {
	patches, _ := patchesFrom(msgs, rev.MessageID, rev.PartID)
	var files []string
	for _, r := range restoreOrder(patches) {
		files = append(files, r.path)
	}
	return files
}

// joinPatches is the unified diff between two snapshots, all files.
func joinPatches(ctx context.Context, s *snapshot.Store, dir, from, to string) string {
	diffs, err := s.Diff(ctx, dir, from, to)
	if err != nil {
		return ""
	}
	var sb strings.Builder
	for _, d := range diffs {
		sb.WriteString(d.Patch)
	}
	return sb.String()
}

// Fork copies a session into a new one: its messages before messageID
// (all of them without one; never those a revert point hides), with new
// ids, in one transaction. The copy has no runs: the original's stay its
// own, and the idle parts that close them are not copied. The copy's
// later prompts send the model only the copied history.
func (e *Engine) Fork(ctx context.Context, sessionID, messageID string) (core.Session, error) {
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
			Title: forkTitle(src.Title), Version: src.Version, Agent: src.Agent, Model: src.Model, Permission: src.Permission,
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
