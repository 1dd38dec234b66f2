package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

const operatorPassword = "operator-password"

// keyed is a node that requires the operator's password, with clients for
// the operator and for keys made on it.
type keyed struct {
	*node
	op *client.Client
}

func startKeyed(t *testing.T, opts ...option) *keyed {
	t.Helper()
	n := startNode(t, append([]option{func(c *app.Config) { c.Security.Password = operatorPassword }}, opts...)...)
	n.c.Password = operatorPassword
	return &keyed{node: n, op: n.c}
}

// key makes a key and returns its token and a client that uses it.
func (k *keyed) key(name, sessions string, budget *client.Budget) (client.Key, *client.Client) {
	k.t.Helper()
	made, err := k.op.CreateKey(k.t.Context(), name, sessions, budget)
	if err != nil {
		k.t.Fatalf("create key %s: %v", name, err)
	}
	if !strings.HasPrefix(made.Token, "agd_") {
		k.t.Fatalf("key %s made without a token: %+v", name, made)
	}
	c := client.New(k.app.URL())
	c.Token = made.Token
	return made, c
}

// raw sends a request with a key's token (or the operator's password when
// token is empty) and returns the status and body.
func (k *keyed) raw(method, path, token string, body string) (int, []byte) {
	k.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// A stream that should have been refused would never end.
	ctx, cancel := context.WithTimeout(k.t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, k.app.URL()+path, rd)
	if err != nil {
		k.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else {
		req.SetBasicAuth("opencode", operatorPassword)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		k.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		k.t.Errorf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// sessionRoutes are the documented routes (both dialects) that name a
// session in their path, from the server's own document.
func (k *keyed) sessionRoutes() [][2]string {
	k.t.Helper()
	code, body := k.raw("GET", "/doc", "", "")
	if code != 200 {
		k.t.Fatalf("GET /doc: %d", code)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		k.t.Fatal(err)
	}
	var out [][2]string
	for p, methods := range doc.Paths {
		if !strings.Contains(p, "/session/{id}") && !strings.Contains(p, "{sessionID}") {
			continue
		}
		for m := range methods {
			out = append(out, [2]string{strings.ToUpper(m), p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][1]+out[i][0] < out[j][1]+out[j][0] })
	return out
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// fill puts the session id (and made-up ids for the rest) in a route's
// path.
func fill(p, sid string) string {
	return pathParam.ReplaceAllStringFunc(p, func(name string) string {
		switch name {
		case "{id}", "{sessionID}":
			return sid
		case "{messageID}":
			return "msg_0000000000000000000000000a"
		case "{runID}":
			return "run_0000000000000000000000000a"
		}
		return "per_0000000000000000000000000a"
	})
}

// TestKeySeesOnlyItsSessions walks every route of both dialects that names
// a session with another key's session: each answers exactly as it does
// for a session that does not exist (404), while the owner and a key of
// all sessions see it; the lists, the asks and the event streams leave
// other keys' sessions out.
func TestKeySeesOnlyItsSessions(t *testing.T) {
	t.Parallel()
	k := startKeyed(t)
	ctx := t.Context()
	_, alice := k.key("alice", "own", nil)
	_, bob := k.key("bob", "own", nil)
	_, ops := k.key("ops", "all", nil)

	// Bob's streams are open before Alice does anything (live), and
	// replayed from the start afterwards.
	streams := map[string]*sseReader{}
	for _, p := range []string{"/event", "/global/event", "/api/event"} {
		streams[p] = k.openStream(p, bob.Token)
	}

	secret := outsideFile(t, "alice's secret\n")
	sess, err := alice.CreateSession(ctx, "alice's", "")
	if err != nil {
		t.Fatal(err)
	}
	sid := sess.ID
	if err := alice.SendAsync(ctx, sid, client.Prompt{Text: `tool:read:{"filePath":"` + secret + `"}`}); err != nil {
		t.Fatal(err)
	}
	req := k.waitPermission(sid)

	// Every route that names Alice's session: Bob is told what he is told
	// of a session that does not exist.
	ghost := core.NewID(core.PrefixSession, true)
	routes := k.sessionRoutes()
	if len(routes) < 45 {
		t.Fatalf("only %d routes name a session: %v", len(routes), routes)
	}
	for _, rt := range routes {
		body := ""
		if rt[0] != "GET" && rt[0] != "DELETE" {
			body = "{}"
		}
		code, got := k.raw(rt[0], fill(rt[1], sid), bob.Token, body)
		wantCode, want := k.raw(rt[0], fill(rt[1], ghost), bob.Token, body)
		if code != http.StatusNotFound || code != wantCode || !bytes.Equal(bytes.ReplaceAll(got, []byte(sid), []byte(ghost)), want) {
			t.Errorf("%s %s as another key: %d %s; for no session: %d %s", rt[0], rt[1], code, got, wantCode, want)
		}
	}
	for _, c := range []*client.Client{alice, ops} {
		if _, err := c.Session(ctx, sid); err != nil {
			t.Errorf("the owner or a key of all sessions reads the session: %v", err)
		}
	}

	// The lists.
	k.mustList(bob.Token, sid, false)
	k.mustList(alice.Token, sid, true)
	k.mustList(ops.Token, sid, true)
	k.mustList("", sid, true)
	if code, _ := k.raw("POST", "/permission/"+req.ID+"/reply", bob.Token, `{"reply":"once"}`); code != http.StatusNotFound {
		t.Errorf("Bob answers Alice's ask: %d", code)
	}
	if code, _ := k.raw("POST", "/session", bob.Token, `{"parentID":"`+sid+`"}`); code != http.StatusBadRequest {
		t.Errorf("Bob makes a child of Alice's session: %d", code)
	}
	// Routes that name a session in their body.
	for _, p := range []string{"/experimental/workspace/warp"} {
		code, got := k.raw("POST", p, bob.Token, `{"sessionID":"`+sid+`"}`)
		wantCode, want := k.raw("POST", p, bob.Token, `{"sessionID":"`+ghost+`"}`)
		if code != http.StatusNotFound || code != wantCode || !bytes.Equal(bytes.ReplaceAll(got, []byte(sid), []byte(ghost)), want) {
			t.Errorf("POST %s with another key's session: %d %s; for no session: %d %s", p, code, got, wantCode, want)
		}
	}
	if err := alice.ReplyPermission(ctx, req.ID, "once", ""); err != nil {
		t.Fatal(err)
	}
	if st := k.waitIdle(sid); st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("Alice's run: %+v", st.Last)
	}
	// A copy is its maker's (and spends its maker's budget): Alice does
	// not see the copy a key of all sessions made of her session.
	fork, err := ops.Fork(ctx, sid, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Session(ctx, fork.ID); !isStatus(err, http.StatusNotFound) {
		t.Errorf("Alice reads the copy ops made: %v, want 404", err)
	}

	// Bob's streams end at a session of his own; nothing of Alice's came
	// before it. Alice's replay holds her session (the filter is what
	// leaves it out of Bob's).
	mark, err := bob.CreateSession(ctx, "bob's", "")
	if err != nil {
		t.Fatal(err)
	}
	streams["/event?after=0"] = k.openStream("/event?after=0", bob.Token)
	for p, s := range streams {
		if seen := s.until(mark.ID); strings.Contains(seen, sid) {
			t.Errorf("Bob's %s carried Alice's session:\n%s", p, seen)
		}
	}
	if seen := k.openStream("/event?after=0", alice.Token).until(`"type":"permission.asked"`); !strings.Contains(seen, sid) {
		t.Errorf("Alice's own stream lacks her ask:\n%s", seen)
	}
}

// mustList checks that the session is (or is not) in every list a caller
// reads, while its run waits on an ask.
func (k *keyed) mustList(token, sid string, want bool) {
	k.t.Helper()
	for _, p := range []string{"/session", "/session/status", "/session/active", "/permission", "/experimental/session", "/api/session",
		"/api/session/active", "/api/permission/request"} {
		code, body := k.raw("GET", p, token, "")
		if code != 200 || strings.Contains(string(body), sid) != want {
			k.t.Errorf("GET %s (key %t) lists the session: %t, want %t (%d %s)", p, token != "", !want, want, code, body)
		}
	}
}

// sseReader reads an event stream's data lines.
type sseReader struct {
	t      *testing.T
	cancel context.CancelFunc
	lines  chan string
}

func (k *keyed) openStream(path, token string) *sseReader {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(k.t.Context(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", k.app.URL()+path, nil)
	if err != nil {
		k.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		k.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		k.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	s := &sseReader{t: k.t, cancel: cancel, lines: make(chan string, 1024)}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				s.lines <- sc.Text()
			}
		}
	}()
	k.t.Cleanup(cancel)
	return s
}

// drain reads the stream until it ends (the server ended it, or the
// reader's 30 s ran out).
func (s *sseReader) drain() {
	for range s.lines {
	}
}

// until returns the stream's data lines up to the first that holds mark.
func (s *sseReader) until(mark string) string {
	s.t.Helper()
	defer s.cancel()
	var b strings.Builder
	for line := range s.lines {
		b.WriteString(line + "\n")
		if strings.Contains(line, mark) {
			return b.String()
		}
	}
	s.t.Fatalf("the stream ended before %s:\n%s", mark, b.String())
	return ""
}

// TestKeysAreTheOperators: keys cannot manage keys or use the operator's
// routes; a wrong, unknown or revoked token is refused with 401; the
// token is shown once and the access log names the key, never the token.
func TestKeysAreTheOperators(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	k := startKeyed(t, func(c *app.Config) { c.AccessLog, c.Logger = true, slog.New(slog.NewJSONHandler(logs, nil)) })
	ctx := t.Context()
	made, ci := k.key("ci", "own", &client.Budget{Tokens: 1000})
	for _, rt := range [][2]string{{"GET", "/key"}, {"POST", "/key"}, {"DELETE", "/key/ci"}, {"PATCH", "/key/ci"}, {"PUT", "/auth/openai"}, {"GET", "/pty"},
		{"POST", "/tui/publish"}, {"POST", "/tui/select-session"}, {"GET", "/tui/control/next"}, {"POST", "/mcp"},
		{"POST", "/mcp/x/disconnect"}, {"POST", "/global/dispose"}, {"GET", "/api/pty"}} {
		body := ""
		if rt[0] == "POST" || rt[0] == "PUT" || rt[0] == "PATCH" {
			body = `{"name":"x"}`
		}
		if code, _ := k.raw(rt[0], rt[1], made.Token, body); code != http.StatusForbidden {
			t.Errorf("%s %s with a key: %d, want 403", rt[0], rt[1], code)
		}
	}
	list, err := k.op.Keys(ctx)
	if err != nil || len(list) != 1 || list[0].Token != "" || list[0].Name != "ci" || list[0].Sessions != "own" ||
		list[0].Budget.Tokens != 1000 || list[0].Budget.Spent == nil {
		t.Fatalf("keys listed: %+v, %v", list, err)
	}
	if _, err := ci.CreateSession(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	bad := []string{made.Token + "x", "agd_0123456789abcdef_" + strings.Repeat("A", 43), "agd_nothex", "Bearer"}
	for _, tok := range bad {
		if code, _ := k.raw("GET", "/session", tok, ""); code != http.StatusUnauthorized {
			t.Errorf("token %q: %d, want 401", tok, code)
		}
	}
	if _, err := k.op.RevokeKey(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	// Revoked here: refused at once.
	if code, _ := k.raw("GET", "/session", made.Token, ""); code != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", code)
	}
	if _, err := k.op.RevokeKey(ctx, "ci"); !isStatus(err, 404) {
		t.Errorf("revoke by the name of a revoked key: %v, want 404", err)
	}
	k.op.HTTPClient().CloseIdleConnections()
	k.stop()
	named := false
	for _, l := range logs.lines() {
		named = named || l["msg"] == "request" && l["key"] == made.ID && l["key_name"] == "ci"
	}
	out := logs.text()
	if !named {
		t.Errorf("the access log does not name the key:\n%s", out)
	}
	if strings.Contains(out, made.Token) || strings.Contains(out, made.Token[len(made.Token)-20:]) {
		t.Errorf("the access log holds the token:\n%s", out)
	}
}

func (s *syncBuffer) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func isStatus(err error, code int) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.StatusCode == code
}
