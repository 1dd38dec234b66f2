// Package client is a small Go client for agentd's HTTP API (and the
// opencode-compatible part of it). The agentd CLI is built on it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// Types re-exported for users of this package.
type (
	// Session is a durable conversation.
	Session = core.Session
	// SessionStatus is what a session is doing.
	SessionStatus = core.SessionStatus
	// MessageWithParts is a message with its parts.
	MessageWithParts = core.MessageWithParts
	// Run is one execution of the agent loop.
	Run = core.Run
	// ModelRef names a model.
	ModelRef = core.ModelRef
)

// Client talks to one agentd server.
type Client struct {
	// BaseURL is the server's root, e.g. http://127.0.0.1:4096.
	BaseURL string
	// HTTP is the client used for requests; nil means http.DefaultClient.
	HTTP *http.Client
	// Username and Password set HTTP basic auth when Password is set.
	Username string
	Password string
	// Token, when set, is an API key's bearer token, sent instead of the
	// password.
	Token string
}

// New returns a client for baseURL.
func New(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/")}
}

// Error is an error answer from the server.
type Error struct {
	StatusCode int
	Name       string
	Message    string
	// Body is the raw answer, for answers such as 408 from wait that carry
	// a status.
	Body []byte
	// RetryAfter is the server's Retry-After (503 when the disk is full,
	// 429), zero when it sent none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("%d %s", e.StatusCode, e.Name)
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.StatusCode, e.Name)
}

// HTTPClient is the client requests are made with.
func (c *Client) HTTPClient() *http.Client { return c.httpClient() }

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// A failed run is an error of Send, not a message that carries one.
	req.Header.Set("X-Agentd-Errors", "status")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	} else if c.Password != "" {
		user := c.Username
		if user == "" {
			user = "opencode"
		}
		req.SetBasicAuth(user, c.Password)
	}
	return req, nil
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &Error{StatusCode: resp.StatusCode, Body: b}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		var ce core.Error
		var tag struct {
			Tag     string `json:"_tag"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &ce) == nil && ce.Name != "" {
			e.Name, e.Message = ce.Name, ce.Data.Message
		} else if json.Unmarshal(b, &tag) == nil && tag.Tag != "" {
			e.Name, e.Message = tag.Tag, tag.Message
		} else {
			e.Name, e.Message = resp.Status, strings.TrimSpace(string(b))
		}
		return e
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return nil
}

// FileDiff is how one file differs between two snapshots of a session's
// workspace (opencode's SnapshotFileDiff).
type FileDiff struct {
	File      string `json:"file"`
	Patch     string `json:"patch"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"`
}

// Revert undoes a session from a message (and, when partID is set, a part
// of it) on: the files its steps changed are restored, and the messages
// hidden until the next prompt drops them or Unrevert brings them back.
func (c *Client) Revert(ctx context.Context, sessionID, messageID, partID string) (Session, error) {
	var s Session
	body := map[string]string{"messageID": messageID}
	if partID != "" {
		body["partID"] = partID
	}
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/revert", body, &s)
	return s, err
}

// Unrevert brings back what the session's revert undid.
func (c *Client) Unrevert(ctx context.Context, sessionID string) (Session, error) {
	var s Session
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/unrevert", nil, &s)
	return s, err
}

// Diff is what the session changed in its workspace (messageID: that
// message's turn only).
func (c *Client) Diff(ctx context.Context, sessionID, messageID string) ([]FileDiff, error) {
	var out []FileDiff
	path := "/session/" + url.PathEscape(sessionID) + "/diff"
	if messageID != "" {
		path += "?messageID=" + url.QueryEscape(messageID)
	}
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Fork copies a session's messages before messageID (all of them when
// empty) into a new session.
func (c *Client) Fork(ctx context.Context, sessionID, messageID string) (Session, error) {
	var s Session
	body := map[string]string{}
	if messageID != "" {
		body["messageID"] = messageID
	}
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/fork", body, &s)
	return s, err
}

// Shell runs the user's own command in the session (no model) and
// returns the assistant message holding the bash call and its output.
func (c *Client) Shell(ctx context.Context, sessionID, agent, command string) (MessageWithParts, error) {
	var m MessageWithParts
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/shell", map[string]string{"agent": agent, "command": command}, &m)
	return m, err
}

// Health reports the server's version when it is healthy.
func (c *Client) Health(ctx context.Context) (string, error) {
	var h struct {
		Healthy bool   `json:"healthy"`
		Version string `json:"version"`
	}
	if err := c.do(ctx, "GET", "/global/health", nil, &h); err != nil {
		return "", err
	}
	if !h.Healthy {
		return h.Version, errors.New("the server reports itself unhealthy")
	}
	return h.Version, nil
}

// CreateSession creates a session in directory ("" for the server's).
func (c *Client) CreateSession(ctx context.Context, title, directory string) (Session, error) {
	var s Session
	body := map[string]any{}
	if title != "" {
		body["title"] = title
	}
	path := "/session"
	if directory != "" {
		path += "?directory=" + url.QueryEscape(directory)
	}
	err := c.do(ctx, "POST", path, body, &s)
	return s, err
}

// Sessions lists sessions, most recently updated first.
func (c *Client) Sessions(ctx context.Context, limit int) ([]Session, error) {
	var out []Session
	path := "/session"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	err := c.do(ctx, "GET", path, nil, &out)
	return out, err
}

// Session gets one session.
func (c *Client) Session(ctx context.Context, id string) (Session, error) {
	var s Session
	err := c.do(ctx, "GET", "/session/"+url.PathEscape(id), nil, &s)
	return s, err
}

// UpdateSession sets a session's title.
func (c *Client) UpdateSession(ctx context.Context, id, title string) (Session, error) {
	var s Session
	err := c.do(ctx, "PATCH", "/session/"+url.PathEscape(id), map[string]string{"title": title}, &s)
	return s, err
}

// Summarize compacts the session: later prompts start from a summary of
// what came before.
func (c *Client) Summarize(ctx context.Context, id string) error {
	return c.do(ctx, "POST", "/session/"+url.PathEscape(id)+"/summarize", map[string]string{}, nil)
}

// Status gets one session's status (404 for an unknown session).
func (c *Client) Status(ctx context.Context, id string) (SessionStatus, error) {
	var st SessionStatus
	err := c.do(ctx, "GET", "/session/"+url.PathEscape(id)+"/status", nil, &st)
	return st, err
}

// Statuses lists the sessions that have a non-terminal run, with agentd's
// full status (run id, phase).
func (c *Client) Statuses(ctx context.Context) (map[string]SessionStatus, error) {
	var m map[string]SessionStatus
	err := c.do(ctx, "GET", "/session/active", nil, &m)
	return m, err
}

// Prompt is a prompt to send.
type Prompt struct {
	Text      string
	MessageID string
	Model     *ModelRef
	// Busy is the busy policy: steer (default), queue, reject, interrupt.
	Busy string
	// Agent names the agent to answer (default build).
	Agent string
	// System is added to the system prompt of the run.
	System string
	// Variant picks a named set of the model's options.
	Variant string
	// Schema, when set, asks for structured output: the answer as JSON
	// matching this JSON Schema, in the message's Structured field.
	Schema json.RawMessage
	// Files are attached after the text.
	Files []FilePart
}

// FilePart is a file attached to a prompt: its URL is a data: URL (the
// content travels with the prompt) or a file:// one.
type FilePart struct {
	Mime     string `json:"mime"`
	Filename string `json:"filename,omitempty"`
	URL      string `json:"url"`
	// Source, when set, is where the file came from (opencode's
	// FilePartSource); the server keeps it with the part.
	Source json.RawMessage `json:"source,omitempty"`
}

func (p Prompt) body() map[string]any {
	parts := []map[string]any{{"type": "text", "text": p.Text}}
	for _, f := range p.Files {
		fp := map[string]any{"type": "file", "mime": f.Mime, "filename": f.Filename, "url": f.URL}
		if len(f.Source) > 0 {
			fp["source"] = f.Source
		}
		parts = append(parts, fp)
	}
	b := map[string]any{"parts": parts}
	if p.MessageID != "" {
		b["messageID"] = p.MessageID
	}
	if p.Model != nil {
		b["model"] = p.Model
	}
	if p.Busy != "" {
		b["busy"] = p.Busy
	}
	if p.Agent != "" {
		b["agent"] = p.Agent
	}
	if p.System != "" {
		b["system"] = p.System
	}
	if p.Variant != "" {
		b["variant"] = p.Variant
	}
	if p.Schema != nil {
		b["format"] = map[string]any{"type": "json_schema", "schema": p.Schema}
	}
	return b
}

// Send sends a prompt and blocks until its run ends, returning the run's
// last assistant message.
func (c *Client) Send(ctx context.Context, sessionID string, p Prompt) (MessageWithParts, error) {
	var m MessageWithParts
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/message", p.body(), &m)
	return m, err
}

// SendAsync sends a prompt and returns once it is durably admitted.
func (c *Client) SendAsync(ctx context.Context, sessionID string, p Prompt) error {
	return c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/prompt_async", p.body(), nil)
}

// Abort aborts the session's active run and reports whether there was one.
func (c *Client) Abort(ctx context.Context, sessionID string) (bool, error) {
	var ok bool
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/abort", nil, &ok)
	return ok, err
}

// Wait blocks until the session is idle (or runID ended, when set), for at
// most timeout, and returns the status. At the timeout it returns the
// current status and an *Error with StatusCode 408.
func (c *Client) Wait(ctx context.Context, sessionID, runID string, timeout time.Duration) (SessionStatus, error) {
	q := url.Values{}
	q.Set("timeout", timeout.String())
	if runID != "" {
		q.Set("run", runID)
	}
	var st SessionStatus
	err := c.do(ctx, "POST", "/session/"+url.PathEscape(sessionID)+"/wait?"+q.Encode(), nil, &st)
	if e, ok := err.(*Error); ok && e.StatusCode == http.StatusRequestTimeout {
		_ = json.Unmarshal(e.Body, &st)
	}
	return st, err
}

// Messages lists a session's messages.
func (c *Client) Messages(ctx context.Context, sessionID string) ([]MessageWithParts, error) {
	var out []MessageWithParts
	err := c.do(ctx, "GET", "/session/"+url.PathEscape(sessionID)+"/message", nil, &out)
	return out, err
}

// Runs lists a session's runs, newest first.
func (c *Client) Runs(ctx context.Context, sessionID string) ([]Run, error) {
	var out []Run
	err := c.do(ctx, "GET", "/session/"+url.PathEscape(sessionID)+"/run", nil, &out)
	return out, err
}

// Run gets one run.
func (c *Client) Run(ctx context.Context, sessionID, runID string) (Run, error) {
	var out Run
	err := c.do(ctx, "GET", "/session/"+url.PathEscape(sessionID)+"/run/"+url.PathEscape(runID), nil, &out)
	return out, err
}

// RunOf returns the id of the run that answers the prompt messageID: the
// run it started, or, when it joined a running run (busy policy steer),
// that run.
func (c *Client) RunOf(ctx context.Context, sessionID, messageID string) (string, error) {
	var runs []Run
	if err := c.do(ctx, "GET", "/session/"+url.PathEscape(sessionID)+"/run?limit=50", nil, &runs); err != nil {
		return "", err
	}
	for _, r := range runs {
		if r.UserMessageID == messageID {
			return r.ID, nil
		}
	}
	st, err := c.Status(ctx, sessionID)
	if err != nil {
		return "", err
	}
	if st.RunID != "" {
		return st.RunID, nil
	}
	if st.Last != nil {
		return st.Last.RunID, nil
	}
	return "", fmt.Errorf("no run answers message %s", messageID)
}

// Event is one event received from a stream. Seq is 0 for live-only
// events.
type Event struct {
	Seq int64
	// Head is set on server.connected, the first event of every stream:
	// the log's head when the stream opened (X-Agentd-Seq). Durable
	// events at or below it happened before the stream.
	Head       int64
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

// Events streams events, calling fn for each, until ctx ends, the stream
// breaks, or fn returns an error. With hasAfter it replays from after;
// sessionID restricts the stream to one session.
func (c *Client) Events(ctx context.Context, sessionID string, after int64, hasAfter bool, fn func(Event) error) error {
	path := "/event"
	if sessionID != "" {
		path = "/session/" + url.PathEscape(sessionID) + "/event"
	}
	req, err := c.newRequest(ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if hasAfter {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		var ce core.Error
		_ = json.Unmarshal(b, &ce)
		return &Error{StatusCode: resp.StatusCode, Name: ce.Name, Message: ce.Data.Message, Body: b}
	}
	head, _ := strconv.ParseInt(resp.Header.Get("X-Agentd-Seq"), 10, 64)
	return ReadSSE(resp.Body, func(ev Event) error {
		if ev.Type == core.EventServerConnected {
			ev.Head = head
		}
		return fn(ev)
	})
}

// ReadSSE parses a text/event-stream body of agentd events.
func ReadSSE(r io.Reader, fn func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var id string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				id = ""
				continue
			}
			var ev Event
			if err := json.Unmarshal(data.Bytes(), &ev); err != nil {
				return fmt.Errorf("decode event: %w", err)
			}
			if id != "" {
				ev.Seq, _ = strconv.ParseInt(id, 10, 64)
			}
			id = ""
			data.Reset()
			if err := fn(ev); err != nil {
				return err
			}
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(line[5:], " "))
		}
	}
	return sc.Err()
}

// PermissionRequest is a pending question to the user.
type PermissionRequest = core.PermissionRequest

// Permissions lists pending permission requests.
func (c *Client) Permissions(ctx context.Context) ([]PermissionRequest, error) {
	var out []PermissionRequest
	err := c.do(ctx, "GET", "/permission", nil, &out)
	return out, err
}

// ReplyPermission answers a request: "once", "always" or "reject" (with an
// optional message for the model).
func (c *Client) ReplyPermission(ctx context.Context, id, reply, message string) error {
	return c.do(ctx, "POST", "/permission/"+url.PathEscape(id)+"/reply", map[string]string{"reply": reply, "message": message}, nil)
}

// ReplyQuestion answers a question the model asked: per question, the
// labels chosen or the user's own words.
func (c *Client) ReplyQuestion(ctx context.Context, id string, answers [][]string) error {
	return c.do(ctx, "POST", "/question/"+url.PathEscape(id)+"/reply", map[string]any{"answers": answers}, nil)
}

// RejectQuestion dismisses a question the model asked.
func (c *Client) RejectQuestion(ctx context.Context, id string) error {
	return c.do(ctx, "POST", "/question/"+url.PathEscape(id)+"/reject", nil, nil)
}
