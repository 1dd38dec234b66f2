package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentd/agentd/internal/core"
)

// Permission implements store.Reader.
func (r Reader) Permission(ctx context.Context, id string) (core.PermissionRequest, error) {
	var p core.PermissionRequest
	err := r.one(ctx, &p, "permission", `SELECT data FROM permissions WHERE id = ?`, id)
	return p, err
}

// PendingPermissions implements store.Reader.
func (r Reader) PendingPermissions(ctx context.Context, sessionID string) ([]core.PermissionRequest, error) {
	var rows *sql.Rows
	var err error
	if sessionID == "" {
		rows, err = r.query(ctx, `SELECT data FROM permissions WHERE pending = 1 ORDER BY id`)
	} else {
		rows, err = r.query(ctx, `SELECT data FROM permissions WHERE pending = 1 AND session_id = ? ORDER BY id`, sessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("list permissions: %w", err)
	}
	return decodeRows[core.PermissionRequest](rows, "permissions")
}

// Question implements store.Reader.
func (r Reader) Question(ctx context.Context, id string) (core.QuestionRequest, error) {
	var q core.QuestionRequest
	err := r.one(ctx, &q, "question", `SELECT data FROM questions WHERE id = ?`, id)
	return q, err
}

// PendingQuestions implements store.Reader.
func (r Reader) PendingQuestions(ctx context.Context, sessionID string) ([]core.QuestionRequest, error) {
	q, args := `SELECT data FROM questions WHERE pending = 1 ORDER BY id`, []any{}
	if sessionID != "" {
		q, args = `SELECT data FROM questions WHERE pending = 1 AND session_id = ? ORDER BY id`, []any{sessionID}
	}
	rows, err := r.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list questions: %w", err)
	}
	return decodeRows[core.QuestionRequest](rows, "questions")
}

// RunQuestions implements store.Reader.
func (r Reader) RunQuestions(ctx context.Context, runID string) ([]core.QuestionRequest, error) {
	rows, err := r.query(ctx, `SELECT data FROM questions WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list run questions: %w", err)
	}
	return decodeRows[core.QuestionRequest](rows, "questions")
}

// RunPermissions implements store.Reader.
func (r Reader) RunPermissions(ctx context.Context, runID string) ([]core.PermissionRequest, error) {
	rows, err := r.query(ctx, `SELECT data FROM permissions WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("list run permissions: %w", err)
	}
	return decodeRows[core.PermissionRequest](rows, "permissions")
}
