package engine

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/prompt"
	"github.com/agentd/agentd/internal/store"
)

// Titles. A session whose title is still the one it got at creation gets
// one written by the small model (else the prompt's) from the prompt being
// admitted, off the run's critical path: it never delays or fails a run. A
// title lost to a crash is written from the session's next prompt.

// maxTitle bounds a title, in characters.
const maxTitle = 50

// titleTimeout bounds one title request.
const titleTimeout = time.Minute

// titleLater writes the session's title from parts in the background.
func (e *Engine) titleLater(sessionID string, model core.ModelRef, parts []InputPart) {
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == core.PartText && sb.Len() < 4000 {
			sb.WriteString(p.Text)
			sb.WriteString("\n")
		}
	}
	text := strings.TrimSpace(sb.String())
	if text == "" {
		return
	}
	if e.cfg.SmallModel != nil {
		model = *e.cfg.SmallModel
	}
	e.mu.Lock()
	if e.closing || e.baseCtx == nil {
		e.mu.Unlock()
		return
	}
	e.wg.Add(1)
	base := e.baseCtx
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(base, titleTimeout)
		defer cancel()
		if err := e.writeTitle(ctx, sessionID, model, text); err != nil && ctx.Err() == nil {
			e.log.Warn("session title", "session", sessionID, "err", err)
		}
	}()
}

func (e *Engine) writeTitle(ctx context.Context, sessionID string, ref core.ModelRef, text string) error {
	p, m, err := e.models.Resolve(ref)
	if err != nil {
		return err
	}
	req := llm.Request{Model: m.Name, System: []string{prompt.Title}, MaxTokens: 64, Options: m.Options,
		Purpose:  llm.PurposeTitle,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: text}}}}}
	var sb strings.Builder
	err = p.Stream(ctx, req, func(ev llm.Event) error {
		if ev.Kind == llm.EventText {
			sb.WriteString(ev.Text)
		}
		return nil
	})
	if err != nil {
		return err
	}
	title := cleanTitle(sb.String())
	if title == "" {
		return nil
	}
	return e.st.Tx(ctx, func(tx store.Tx) error {
		sess, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		if !core.IsDefaultTitle(sess.Title) {
			return nil // set meanwhile, by a person or an earlier title
		}
		sess.Title = title
		w := writer{ctx: ctx, tx: tx}
		w.session(sess)
		return w.err
	})
}

// cleanTitle keeps the first line of a model's answer, without quotes or
// a final full stop, within maxTitle characters.
func cleanTitle(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(strings.TrimSpace(s), "\"'`*# ")
	s = strings.TrimSuffix(s, ".")
	if utf8.RuneCountInString(s) > maxTitle {
		r := []rune(s)
		s = strings.TrimSpace(string(r[:maxTitle-1])) + "…"
	}
	return s
}
