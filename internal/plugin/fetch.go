package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/llm"
)

// fetchTransport carries a provider's HTTP requests to the fetch a
// plugin's auth loader returned: the request goes to the host whole
// (models' requests are JSON of a bounded size), the answer's head comes
// back as the call's result within the hook timeout, and its body streams
// back chunk by chunk (fetch.chunk notifications, then fetch.end), so
// that a model's answer arrives as it is written. The body is flow
// controlled: the host sends no more than the bytes agentd granted it (a
// window, fetchWindow, granted again as the reader consumes it), so a
// slow reader holds at most a window per stream here and the host stops
// reading the provider's answer meanwhile. A cancelled request aborts the
// plugin's fetch; a host that exits fails the body.
type fetchTransport struct {
	h             *Host
	dir, provider string
}

// noKey is the key a provider's client is built with when a plugin's
// fetch carries its calls and no key is known; it never leaves agentd.
const noKey = "agentd-plugin-fetch-no-key"

// fetchWindow is how many bytes of a fetch's body the host may send
// ahead of the reader: what one stream holds here at most. The reader's
// consumption is granted back in steps of half a window, so that a fast
// reader waits for no round trip.
const fetchWindow = 1 << 20

type fetchParams struct {
	Ref       string            `json:"ref"`
	Directory string            `json:"directory"`
	Provider  string            `json:"provider"`
	URL       string            `json:"url"`
	Method    string            `json:"method"`
	Headers   map[string]string `json:"headers"`
	Body      []byte            `json:"body,omitempty"`
	Window    int               `json:"window"`
}

// RoundTrip implements http.RoundTripper.
func (t *fetchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx := r.Context()
	p, err := t.h.current(ctx)
	if err != nil {
		return nil, t.failure(ctx, err)
	}
	if _, err := t.h.instance(ctx, p, t.dir); err != nil {
		return nil, t.failure(ctx, err)
	}
	headers := make(map[string]string, len(r.Header))
	for k, v := range r.Header {
		// The key the client was built with when the loader gave none
		// reaches the plugin empty, as opencode's AI SDK sends it.
		headers[k] = strings.ReplaceAll(strings.Join(v, ", "), noKey, "")
	}
	s := t.h.newFetch(p, t.h.fetchWindow)
	var head struct {
		Status     int               `json:"status"`
		StatusText string            `json:"statusText"`
		Headers    map[string]string `json:"headers"`
	}
	timeout := t.h.opts.Timeout
	cctx, cancel := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("no answer within %s (agentd.plugins.timeout)", timeout))
	err = p.conn.call(cctx, "fetch", fetchParams{Ref: s.ref, Directory: t.dir, Provider: t.provider, URL: r.URL.String(),
		Method: r.Method, Headers: headers, Body: body, Window: s.window}, &head)
	cancel()
	if err != nil {
		s.Close()
		t.h.timedOut(p, err)
		return nil, t.failure(ctx, err)
	}
	s.stop = context.AfterFunc(ctx, func() { s.fail(context.Cause(ctx)) })
	res := &http.Response{StatusCode: head.Status, Status: strconv.Itoa(head.Status) + " " + head.StatusText,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: s, ContentLength: -1, Request: r}
	for k, v := range head.Headers {
		res.Header.Set(k, v)
	}
	return res, nil
}

// failure is the model call's error for a fetch that gave no head: the
// request's own cancellation as is, else the plugin's reason, worth
// another try when the plugin gave no answer or its host went away.
func (t *fetchTransport) failure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	msg := err.Error()
	e := &llm.APIError{Message: fmt.Sprintf("the fetch of provider %s's plugin: %s", t.provider, msg)}
	var he *HookError
	if !errors.As(err, &he) || strings.Contains(msg, errHostGone.Error()) || strings.Contains(msg, "restarting") {
		e.Retryable, e.MaxAttempts = true, 2
	}
	return e
}

// fetchStream is a fetch's body as it arrives from the host.
type fetchStream struct {
	h      *Host
	p      *proc
	ref    string
	window int         // bytes the host may send ahead of the reader
	stop   func() bool // ends the watch on the request's context

	mu       sync.Mutex
	chunks   [][]byte
	size     int   // bytes received and not yet read
	peak     int   // the most size has been (for the tests)
	granted  int64 // bytes the host was allowed to send, in all
	received int64 // bytes it sent
	consumed int   // bytes read since the last grant
	err      error // io.EOF once the body ended
	closed   bool
	wake     chan struct{}
}

func (h *Host) newFetch(p *proc, window int) *fetchStream {
	h.auth.mu.Lock()
	defer h.auth.mu.Unlock()
	h.auth.seq++
	s := &fetchStream{h: h, p: p, ref: "f" + strconv.FormatInt(h.auth.seq, 10), wake: make(chan struct{}, 1),
		window: window, granted: int64(window)}
	if h.auth.fetches == nil {
		h.auth.fetches = map[string]*fetchStream{}
	}
	h.auth.fetches[s.ref] = s
	return s
}

// fetchEvent hands a chunk or the end of a body to its stream.
func (h *Host) fetchEvent(m message) {
	var p struct {
		Ref   string `json:"ref"`
		Data  []byte `json:"data"`
		Error string `json:"error"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	h.auth.mu.Lock()
	s := h.auth.fetches[p.Ref]
	h.auth.mu.Unlock()
	if s == nil {
		return // its reader closed it
	}
	if m.Method == "fetch.chunk" {
		s.push(p.Data)
		return
	}
	if p.Error != "" {
		s.fail(&llm.APIError{Message: "the plugin's fetch broke off: " + p.Error, Retryable: true})
		return
	}
	s.fail(io.EOF)
}

// fetchesGone fails the bodies a host that exited was streaming.
func (h *Host) fetchesGone(p *proc) {
	h.auth.mu.Lock()
	var gone []*fetchStream
	for _, s := range h.auth.fetches {
		if s.p == p {
			gone = append(gone, s)
		}
	}
	for k := range h.auth.loaded {
		if k.p == p {
			delete(h.auth.loaded, k)
		}
	}
	h.auth.mu.Unlock()
	for _, s := range gone {
		s.fail(&llm.APIError{Message: "the plugin host exited while a model's answer streamed through its fetch", Retryable: true})
	}
}

func (s *fetchStream) push(b []byte) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if s.received+int64(len(b)) > s.granted {
		s.mu.Unlock()
		s.fail(&llm.APIError{Message: "the plugin host sent more of a fetch's body than it was granted"})
		return
	}
	s.chunks = append(s.chunks, b)
	s.size += len(b)
	s.received += int64(len(b))
	s.peak = max(s.peak, s.size)
	s.mu.Unlock()
	s.signal()
}

// fail ends the body with err (io.EOF: its end); the first end counts. A
// body that did not end normally has the host abort the plugin's fetch.
func (s *fetchStream) fail(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	s.mu.Unlock()
	s.signal()
	if err != io.EOF {
		reason := "aborted"
		if err != nil {
			reason = err.Error()
		}
		_ = s.p.conn.notify("fetch.abort", map[string]string{"ref": s.ref, "reason": reason})
	}
}

func (s *fetchStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Read implements io.Reader.
func (s *fetchStream) Read(b []byte) (int, error) {
	for {
		s.mu.Lock()
		if len(s.chunks) > 0 {
			n := copy(b, s.chunks[0])
			if n == len(s.chunks[0]) {
				s.chunks[0] = nil
				s.chunks = s.chunks[1:]
			} else {
				s.chunks[0] = s.chunks[0][n:]
			}
			s.size -= n
			s.consumed += n
			grant := 0
			if s.consumed >= s.window/2 && s.err == nil {
				grant, s.consumed = s.consumed, 0
				s.granted += int64(grant)
			}
			s.mu.Unlock()
			if grant > 0 {
				// A host that went away fails the stream on its own.
				_ = s.p.conn.notify("fetch.credit", map[string]any{"ref": s.ref, "bytes": grant})
			}
			return n, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return 0, err
		}
		<-s.wake
	}
}

// Close implements io.Closer: a body closed before its end aborts the
// plugin's fetch.
func (s *fetchStream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.stop != nil {
		s.stop()
	}
	s.fail(errors.New("the body was closed"))
	s.h.auth.mu.Lock()
	delete(s.h.auth.fetches, s.ref)
	s.h.auth.mu.Unlock()
	return nil
}
