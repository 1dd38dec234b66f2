package opencode_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// agentdEventTypes are the event types agentd adds to opencode's; they are
// not in opencode's Event union and its clients ignore them.
// server.heartbeat is opencode's own, but its document does not list it.
var agentdEventTypes = map[string]bool{"run.updated": true, "server.gap": true, "server.heartbeat": true, "revert.updated": true,
	"session.forked": true}

// exchange is one request and its answer, as seen by the recorder.
type exchange struct {
	method, path string
	status       int
	ctype        string
	body         []byte
}

// streamed is one event seen on an SSE answer.
type streamed struct {
	path string
	id   string // the SSE id line ("" for live-only events)
	data []byte
}

// recorder is a reverse proxy in front of agentd that keeps every answer
// and every streamed event, so that whatever a client (Go, the opencode
// CLI, the TUI) made agentd send can be judged by opencode's schemas.
type recorder struct {
	srv *httptest.Server

	mu        sync.Mutex
	exchanges []exchange
	events    []streamed
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	// A client that goes away mid-answer (Ctrl-C) is expected here.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Accept-Encoding")

		rw := &recordingWriter{ResponseWriter: w, rec: rec, path: r.URL.Path, status: 200}
		proxy.ServeHTTP(rw, r)
		rw.finish(r.Method)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// URL is the address clients should use.
func (rec *recorder) URL() string { return rec.srv.URL }

type recordingWriter struct {
	http.ResponseWriter
	rec    *recorder
	path   string
	status int
	body   bytes.Buffer
	sse    bool
	// pending holds the part of the stream after the last complete event.
	pending []byte
}

func (w *recordingWriter) WriteHeader(status int) {
	w.status = status
	w.sse = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.sse {
		w.pending = append(w.pending, b...)
		for {
			i := bytes.Index(w.pending, []byte("\n\n"))
			if i < 0 {
				break
			}
			w.event(w.pending[:i])
			w.pending = w.pending[i+2:]
		}
	} else {
		w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recordingWriter) event(block []byte) {
	var id string
	var data []byte
	for _, line := range strings.Split(string(block), "\n") {
		switch {
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " ")...)
		}
	}
	if data == nil {
		return
	}
	w.rec.mu.Lock()
	w.rec.events = append(w.rec.events, streamed{path: w.path, id: id, data: data})
	w.rec.mu.Unlock()
}

func (w *recordingWriter) finish(method string) {
	if w.sse {
		return
	}
	w.rec.mu.Lock()
	w.rec.exchanges = append(w.rec.exchanges, exchange{method: method, path: w.path, status: w.status,
		ctype: w.Header().Get("Content-Type"), body: w.body.Bytes()})
	w.rec.mu.Unlock()
}

// waitEvents waits until every one of types has been recorded on some
// stream (the streams carry the last events of a scenario a moment after
// its last answer), or 30 s have passed; check then reports the missing.
// A fixed pause here was a window a loaded machine missed.
func (rec *recorder) waitEvents(t *testing.T, types []string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		seen := rec.seenTypes()
		missing := false
		for _, typ := range types {
			missing = missing || !seen[typ]
		}
		if !missing {
			return
		}
	}
	t.Logf("after 30 s the streams still lack some of %v", types)
}

// seenTypes is the set of event types recorded so far, on every stream.
func (rec *recorder) seenTypes() map[string]bool {
	rec.mu.Lock()
	events := append([]streamed(nil), rec.events...)
	rec.mu.Unlock()
	seen := map[string]bool{}
	for _, ev := range events {
		data := ev.data
		if ev.path == "/global/event" {
			var wrap struct {
				Payload json.RawMessage `json:"payload"`
			}
			if json.Unmarshal(data, &wrap) != nil {
				continue
			}
			data = wrap.Payload
		}
		var env struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &env) == nil {
			seen[env.Type] = true
		}
	}
	return seen
}

// verdict is what checking a recorder found.
type verdict struct {
	operations map[string]int // "GET /session/{sessionID}" → answers judged
	eventTypes map[string]int // event type → events judged
}

// check validates everything recorded against opencode's document and
// reports each violation as a test error.
func (rec *recorder) check(t *testing.T) verdict {
	t.Helper()
	rec.mu.Lock()
	exchanges := append([]exchange(nil), rec.exchanges...)
	events := append([]streamed(nil), rec.events...)
	rec.mu.Unlock()
	v := verdict{operations: map[string]int{}, eventTypes: map[string]int{}}
	badRequest, err := doc.schema("/components/schemas/BadRequestError")
	if err != nil {
		t.Fatal(err)
	}
	failures := 0
	fail := func(format string, args ...any) {
		failures++
		if failures <= 40 {
			t.Errorf(format, args...)
		}
	}
	for _, ex := range exchanges {
		tmpl, ok := doc.route(ex.method, ex.path)
		if !ok || tmpl == "/doc" {
			continue // agentd's own route, or its own OpenAPI document
		}
		op := ex.method + " " + tmpl
		if len(ex.body) == 0 {
			v.operations[op]++
			continue
		}
		if op == "GET /vcs/diff/raw" && ex.status == http.StatusOK && strings.HasPrefix(ex.ctype, "text/x-diff") {
			v.operations[op]++ // a patch, as opencode's document says
			continue
		}
		if !strings.HasPrefix(ex.ctype, "application/json") {
			if doc.binary(tmpl, ex.method, ex.status) {
				v.operations[op]++ // opencode 2's file read: the file's bytes
				continue
			}
			fail("%s %s: answered %d with %q, not JSON", ex.method, ex.path, ex.status, ex.ctype)
			continue
		}
		var s = badRequest
		if ex.status == http.StatusBadRequest && validate(badRequest, ex.body) != nil {
			// A route whose document names its own 400 error (the TUI
			// reads ProjectCopyError's forceRequired) is judged by it.
			if own, err := doc.responseSchema(tmpl, ex.method, ex.status); err == nil && own != nil {
				s = own
			}
		}
		if ex.status != http.StatusBadRequest || strings.HasPrefix(tmpl, "/api/") {
			// opencode 2's routes answer bad requests in their own
			// tagged shapes, as the document says.
			// opencode's document gives some routes a tagged 400 shape,
			// but opencode answers every bad request with its named
			// BadRequest error, and so does agentd; a route's own 400
			// (VcsApplyError) is judged by the route's schema.
			if s, err = doc.responseSchema(tmpl, ex.method, ex.status); err != nil {
				t.Fatal(err)
			}
		}
		if s == nil {
			continue // a status opencode's document does not describe
		}
		v.operations[op]++
		if err := validate(s, ex.body); err != nil {
			fail("%s %s → %d: %v\nbody: %.600s", ex.method, ex.path, ex.status, err, ex.body)
		}
	}
	for _, ev := range events {
		data := ev.data
		if ev.path == "/global/event" {
			var wrap map[string]json.RawMessage
			if err := json.Unmarshal(data, &wrap); err != nil {
				fail("global event is not an object: %s", data)
				continue
			}
			for k := range wrap {
				if k != "directory" && k != "payload" && k != "project" && k != "workspace" {
					fail("global event has field %q: %s", k, data)
				}
			}
			var dir string
			if json.Unmarshal(wrap["directory"], &dir) != nil || dir == "" {
				fail("global event without a directory: %.300s", data)
			}
			data = wrap["payload"]
		}
		check := checkEvent
		if strings.HasPrefix(ev.path, "/api/") {
			session := strings.HasPrefix(ev.path, "/api/session/")
			check = func(b []byte) (string, error) { return checkV2Event(b, session) }
		}
		typ, err := check(data)
		if err != nil {
			fail("event on %s: %v\nevent: %.600s", ev.path, err, data)
		}
		v.eventTypes[typ]++
	}
	return v
}

// checkEvent judges one event: opencode's types by their schema, agentd's
// own by the envelope opencode's clients expect.
func checkEvent(data []byte) (string, error) {
	var env struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return "", fmt.Errorf("not an event object: %w", err)
	}
	if name, ok := doc.eventTypes[env.Type]; ok {
		s, err := doc.schema("/components/schemas/" + pointer(name))
		if err != nil {
			return env.Type, err
		}
		return env.Type, validate(s, data)
	}
	if !agentdEventTypes[env.Type] {
		return env.Type, fmt.Errorf("type %q is neither opencode's nor one of agentd's own", env.Type)
	}
	if !strings.HasPrefix(env.ID, "evt_") || len(env.Properties) == 0 || env.Properties[0] != '{' {
		return env.Type, fmt.Errorf("agentd's %s lacks the envelope (id ^evt_, properties object)", env.Type)
	}
	return env.Type, nil
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkV2Event judges one event of opencode 2's streams by the V2Event
// union (a session's stream: its durable events only); agentd's own
// server.gap by its envelope.
func checkV2Event(data []byte, session bool) (string, error) {
	var env struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return "", fmt.Errorf("not an event object: %w", err)
	}
	if env.Type == "server.gap" {
		if !strings.HasPrefix(env.ID, "evt_") || len(env.Data) == 0 || env.Data[0] != '{' {
			return env.Type, fmt.Errorf("agentd's server.gap lacks the envelope (id ^evt_, data object)")
		}
		return env.Type, nil
	}
	name, ok := doc.v2Types[env.Type]
	if !ok {
		return env.Type, fmt.Errorf("type %q is not in opencode 2's V2Event union", env.Type)
	}
	if session && !doc.durableTypes[env.Type] {
		return env.Type, fmt.Errorf("type %q is not a durable session event (SessionDurableEvent)", env.Type)
	}
	s, err := doc.schema("/components/schemas/" + pointer(name))
	if err != nil {
		return env.Type, err
	}
	return env.Type, validate(s, data)
}
