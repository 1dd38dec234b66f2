package engine

import (
	"context"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/undo"
)

// What opencode 2's API (package apiv2) asks of the engine beyond what
// the v1 routes do.

// CommitRevert retires for good what the session's revert point hides,
// as the next prompt would, and clears the point (opencode 2's revert
// commit). A session without a revert point is left as it is.
func (e *Engine) CommitRevert(ctx context.Context, sessionID string) (core.Session, error) {
	if e.isClosing() {
		return core.Session{}, ErrClosed
	}
	var out core.Session
	err := e.st.Tx(ctx, func(tx store.Tx) error {
		if err := tx.LockSession(ctx, sessionID); err != nil {
			return err
		}
		sess, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		if err := undo.NotReverting(ctx, tx, sessionID); err != nil {
			return err
		}
		w := writer{ctx: ctx, tx: tx}
		if err := retireReverted(ctx, tx, &w, &sess); err != nil {
			return err
		}
		out = sess
		return nil
	})
	return out, err
}

// Decide says what the session's runs would do with a need for
// permission on patterns under the named agent ("" for the default):
// allow, deny or ask, by the operator's, the agent's, the session's and
// the granted rules, as a tool call's need is decided.
func (e *Engine) Decide(ctx context.Context, sessionID, agentName, perm string, patterns []string) (string, error) {
	sess, err := e.st.Session(ctx, sessionID)
	if err != nil {
		return "", err
	}
	rules := append(permission.Defaults(), e.cfg.Permission...)
	if ag, ok := e.agentFor(agentName); ok {
		rules = append(rules, ag.Permission...)
	}
	return tool.Need{Permission: perm, Patterns: patterns}.Decide(rules, sess.Permission, sess.Granted), nil
}
