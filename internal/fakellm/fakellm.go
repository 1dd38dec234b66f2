// Package fakellm is a scripted model provider served over real HTTP. It
// speaks OpenAI Chat Completions (POST /v1/chat/completions, GET
// /v1/models) and Anthropic Messages (POST /v1/messages), streaming and
// not, so that the official SDKs — and agentd's providers built on them —
// are exercised without a key or a network. What it answers is driven by
// the directives of the scripted model (see package scripted) in the last
// user message, plus HTTP-only ones: retryafter:, usage:, disconnect:,
// malformed:.
package fakellm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/prompt"
)

// Server is the fake provider.
type Server struct {
	model scripted.Model

	mu       sync.Mutex
	attempts map[string]int
	record   bool
	recorded []Recorded

	requests atomic.Int64
	inflight atomic.Int64
	// closed is signalled each time a streaming request ends because the
	// client went away.
	closed chan struct{}
}

// Options tunes the fake.
type Options struct {
	// Second is the length of one sleep: second (default 1 s).
	Second time.Duration
	// Record keeps every request body (see Recorded).
	Record bool
}

// New returns a fake provider.
func New(o Options) *Server {
	return &Server{model: scripted.Model{Second: o.Second}, attempts: map[string]int{}, closed: make(chan struct{}, 1024),
		record: o.Record}
}

// Recorded is one request the server received (with Options.Record).
type Recorded struct {
	// Body is the request body as sent.
	Body []byte
	// Request is what the fake understood of it.
	Request llm.Request
}

// Recorded returns the requests received so far, oldest first.
func (s *Server) Recorded() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.recorded...)
}

// received notes a decoded request: it tells title and summary requests
// by their system prompt, as a real model would by reading it, and keeps
// the request when recording.
func (s *Server) received(req *llm.Request, body []byte) {
	if len(req.System) > 0 {
		switch strings.TrimSpace(req.System[0]) {
		case prompt.Title:
			req.Purpose = llm.PurposeTitle
		case prompt.Summary:
			req.Purpose = llm.PurposeSummary
		}
	}
	if !s.record {
		return
	}
	s.mu.Lock()
	s.recorded = append(s.recorded, Recorded{Body: append([]byte(nil), body...), Request: *req})
	s.mu.Unlock()
}

// Requests is how many model requests the server has answered.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Inflight is how many model requests are being answered now.
func (s *Server) Inflight() int64 { return s.inflight.Load() }

// ClientGone receives a value each time a client abandons a stream.
func (s *Server) ClientGone() <-chan struct{} { return s.closed }

// Handler serves the fake APIs.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.openAIChat)
	mux.HandleFunc("POST /chat/completions", s.openAIChat)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /models", s.models)
	mux.HandleFunc("POST /v1/messages", s.anthropicMessages)
	mux.HandleFunc("POST /messages", s.anthropicMessages)
	return mux
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{
		map[string]any{"id": "fake-model", "object": "model", "created": 1700000000, "owned_by": "agentd"},
	}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// attempt counts identical requests, so that fail:CODExK fails the first K
// tries of one request and then lets it through.
func (s *Server) attempt(body []byte) int {
	sum := sha256.Sum256(body)
	key := hex.EncodeToString(sum[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts[key]++
	return s.attempts[key]
}

// script is one decoded request.
type script struct {
	req llm.Request
}

// run produces the events of a request, or an API error to answer with.
func (s *Server) run(ctx context.Context, sc script, attempt int, emit func(llm.Event) error) error {
	sc.req.Attempt = attempt
	return s.model.Stream(ctx, sc.req, emit)
}

func failStatus(w http.ResponseWriter, err *llm.APIError, dirs scripted.Directives, anthropic bool) {
	if dirs.RetryAfter != "" {
		w.Header().Set("Retry-After", dirs.RetryAfter)
	}
	if anthropic {
		typ := "api_error"
		switch {
		case err.StatusCode == 429:
			typ = "rate_limit_error"
		case err.StatusCode == 401:
			typ = "authentication_error"
		case err.StatusCode == 529:
			typ = "overloaded_error"
		case err.StatusCode < 500:
			typ = "invalid_request_error"
		}
		writeJSON(w, err.StatusCode, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": err.Message}})
		return
	}
	writeJSON(w, err.StatusCode, map[string]any{"error": map[string]any{"message": err.Message, "type": "fake_error", "code": strconv.Itoa(err.StatusCode)}})
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	sent  int
	limit int // disconnect after this many chunks (0: never)
}

// newSSE starts a stream. disconnect: applies to the first attempt of a
// request only, so that a retry can succeed.
func newSSE(w http.ResponseWriter, dirs scripted.Directives, attempt int) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	e := &sse{w: w, rc: http.NewResponseController(w)}
	if attempt == 1 {
		e.limit = dirs.Disconnect
	}
	return e
}

// send writes one event; name is the SSE event name ("" for none).
func (e *sse) send(name string, v any) error {
	if e.limit > 0 && e.sent >= e.limit {
		// Drop the connection mid-stream, as a crashed upstream would.
		panic(http.ErrAbortHandler)
	}
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	var sb strings.Builder
	if name != "" {
		sb.WriteString("event: " + name + "\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := io.WriteString(e.w, sb.String()); err != nil {
		return err
	}
	e.sent++
	return e.rc.Flush()
}

func lastUserText(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != llm.RoleUser {
			continue
		}
		var parts []string
		for _, c := range msgs[i].Content {
			if c.Type == llm.ContentText {
				parts = append(parts, c.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

func (s *Server) track(r *http.Request) func() {
	s.requests.Add(1)
	s.inflight.Add(1)
	return func() {
		s.inflight.Add(-1)
		if r.Context().Err() != nil {
			select {
			case s.closed <- struct{}{}:
			default:
			}
		}
	}
}

func badRequest(w http.ResponseWriter, msg string) {
	writeJSON(w, 400, map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func idFor(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, time.Now().UnixNano())
}
