// Package title writes session titles. A session whose title is still the
// one it got at creation gets one written by the small model (else the
// prompt's) from the prompt being admitted, off the run's critical path:
// it never delays or fails a run. A title lost to a crash is written from
// the session's next prompt.
package title

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/prompt"
	"github.com/agentd/agentd/internal/store"
)

// maxTitle bounds a title, in characters.
const maxTitle = 50

// maxText bounds the prompt text a title is asked from, in bytes (the text
// of the parts that start before it is reached).
const maxText = 4000

// timeout bounds one title request.
const timeout = time.Minute

// Models resolves a model reference to a provider and the model's
// provider-side name and options.
type Models interface {
	Resolve(ref core.ModelRef) (llm.Provider, llm.Model, error)
}

// Writer writes titles in the background, each in a goroutine of its own
// that Stop cancels and waits for.
type Writer struct {
	st     store.Store
	models Models
	// small writes titles when set; else the model of the run.
	small *core.ModelRef
	// Choose, when set and small is not, picks the small model of a
	// session in dir whose model is of provider (the plugins'
	// experimental.provider.small_model); nil leaves the run's model.
	Choose func(ctx context.Context, dir, provider string) *core.ModelRef
	// Prepare, when set, passes a title's request through the plugins'
	// hooks of a model call of the session's directory (chat.params,
	// chat.headers, the system's transform), as opencode's title call
	// goes through them; its error is the title's.
	Prepare func(ctx context.Context, sess core.Session, model core.ModelRef, req *llm.Request) error
	log     *slog.Logger

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	closing bool
	wg      sync.WaitGroup
}

// New returns a writer; small, when set, is the model that writes titles.
func New(st store.Store, models Models, small *core.ModelRef, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.Default()
	}
	return &Writer{st: st, models: models, small: small, log: log}
}

// Start lets the writer write titles; they are cancelled with ctx.
func (w *Writer) Start(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil && !w.closing {
		w.ctx, w.cancel = context.WithCancel(ctx)
	}
}

// Stop cancels the titles being written and waits for them. It is
// idempotent and safe before Start.
func (w *Writer) Stop() {
	w.mu.Lock()
	w.closing = true
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	w.wg.Wait()
}

// Wait waits for the titles being written.
func (w *Writer) Wait() { w.wg.Wait() }

// Later writes the session's title, in the background, from the texts of
// the prompt (its text parts) that model answers.
func (w *Writer) Later(sessionID string, model core.ModelRef, texts []string) {
	var sb strings.Builder
	for _, t := range texts {
		if sb.Len() < maxText {
			sb.WriteString(t)
			sb.WriteString("\n")
		}
	}
	text := strings.TrimSpace(sb.String())
	if text == "" {
		return
	}
	if w.small != nil {
		model = *w.small
	}
	w.mu.Lock()
	if w.closing || w.ctx == nil {
		w.mu.Unlock()
		return
	}
	w.wg.Add(1)
	base := w.ctx
	w.mu.Unlock()
	go func() {
		defer w.wg.Done()
		ctx, cancel := context.WithTimeout(base, timeout)
		defer cancel()
		err := w.title(ctx, sessionID, model, text)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("session title", "session", sessionID, "err", err)
		}
	}()
}

// title writes the session's title: the plugins asked are those of the
// session's directory, as for its runs.
func (w *Writer) title(ctx context.Context, sessionID string, model core.ModelRef, text string) error {
	sess, err := w.st.Session(ctx, sessionID)
	if err != nil {
		return err
	}
	if w.small == nil && w.Choose != nil {
		model = w.chosen(ctx, sess, model)
	}
	return w.write(ctx, sess, model, text)
}

// chosen is the small model Choose picks for the session, when it resolves;
// else model.
func (w *Writer) chosen(ctx context.Context, sess core.Session, model core.ModelRef) core.ModelRef {
	ref := w.Choose(ctx, sess.Directory, model.ProviderID)
	if ref == nil {
		return model
	}
	if _, _, err := w.models.Resolve(*ref); err != nil {
		w.log.Warn("the small model a plugin picked is not configured; the session's model writes its title",
			"model", ref.ProviderID+"/"+ref.ModelID, "err", err)
		return model
	}
	return *ref
}

func (w *Writer) write(ctx context.Context, sess core.Session, ref core.ModelRef, text string) error {
	sessionID := sess.ID
	p, m, err := w.models.Resolve(ref)
	if err != nil {
		return err
	}
	req := llm.Request{Model: m.Name, System: []string{prompt.Title}, MaxTokens: 64, Options: m.Options,
		Purpose: llm.PurposeTitle, Directory: sess.Directory,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{{Type: llm.ContentText, Text: text}}}}}
	if w.Prepare != nil {
		if err := w.Prepare(ctx, sess, ref, &req); err != nil {
			return err
		}
	}
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
	title := Clean(sb.String())
	if title == "" {
		return nil
	}
	return w.st.Tx(ctx, func(tx store.Tx) error {
		sess, err := tx.Session(ctx, sessionID)
		if err != nil {
			return err
		}
		if !core.IsDefaultTitle(sess.Title) {
			return nil // set meanwhile, by a person or an earlier title
		}
		sess.Title = title
		if err := tx.UpdateSession(ctx, sess); err != nil {
			return err
		}
		return tx.AppendEvent(ctx, core.MustEvent(sess.ID, core.EventSessionUpdated, core.SessionProps{SessionID: sess.ID, Info: sess}))
	})
}

// Clean keeps the first line of a model's answer, without quotes or a
// final full stop, within maxTitle characters.
func Clean(s string) string {
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
