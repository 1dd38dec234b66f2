package apiv2_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentd/agentd/internal/app"
)

// withTerminals is the operator's agentd.terminal.enabled.
func withTerminals(c *app.Config) { c.Terminals.Enabled = true }

// bashBody is a terminal running an interactive bash without startup
// files.
var bashBody = map[string]any{"command": "/bin/bash", "args": []string{"--norc", "--noprofile", "-i"}, "env": map[string]string{"PS1": "$ "}}

// ptyJSON is opencode's Pty, as the answers carry it.
type ptyJSON struct {
	ID, Title, Command, Cwd, Status string
	Pid                             int
}

// located is an answer {location, data}.
type locatedPty[T any] struct {
	Location struct {
		Directory string `json:"directory"`
	} `json:"location"`
	Data T `json:"data"`
}

// tagOf reads an error body's _tag and message (opencode 2's shape).
func tagOf(t *testing.T, a answer) (string, string) {
	t.Helper()
	var e struct {
		Tag     string `json:"_tag"`
		Message string `json:"message"`
		PtyID   string `json:"ptyID"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("error body is not JSON: %s", a.body)
	}
	return e.Tag, e.Message
}

// send is a request with headers and no body.
func (n *node) send(method, path string, hdr map[string]string) answer {
	n.t.Helper()
	req, err := http.NewRequestWithContext(n.t.Context(), method, n.url+path, nil)
	if err != nil {
		n.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: b, header: resp.Header}
}

// upgrade asks for a websocket without speaking it: the answer to a
// refused upgrade (an accepted one is a 101, its connection dropped).
func (n *node) upgrade(path string) answer {
	n.t.Helper()
	return n.send("GET", path, map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
}

// typeInto dials a terminal's websocket, reads the replay up to the
// cursor frame, types a command and reads its output.
func (n *node) typeInto(path string) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), 15*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(n.url, "http")+path, nil)
	if err != nil {
		n.t.Fatalf("dial %s: %v", path, err)
	}
	defer c.CloseNow()
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			n.t.Fatalf("%s: no cursor frame: %v", path, err)
		}
		if typ == websocket.MessageBinary && len(data) > 0 && data[0] == 0 && strings.HasPrefix(string(data[1:]), `{"cursor":`) {
			break
		}
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("echo hi-$((40+2))\n")); err != nil {
		n.t.Fatal(err)
	}
	var got strings.Builder
	for !strings.Contains(got.String(), "hi-42") {
		typ, data, err := c.Read(ctx)
		if err != nil {
			n.t.Fatalf("read: %v; got %q", err, got.String())
		}
		if typ == websocket.MessageText {
			got.Write(data)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// TestTerminalsV2Flow is an opencode 2 client's terminal: create, list,
// get, resize through update, type over the websocket (with a connect
// ticket too), remove; the instance stream announces it.
func TestTerminalsV2Flow(t *testing.T) {
	t.Parallel()
	n := startNode(t, withTerminals)
	// The instance stream, followed until it announces the removal (or
	// gives up, failing the test).
	connected, announced := make(chan struct{}), make(chan struct{})
	var streamed []event
	go func() {
		defer close(announced)
		n.sse("/api/event", nil, func(evs []event) bool {
			if len(evs) == 1 {
				close(connected)
			}
			streamed = evs
			return count(evs, "pty.deleted") == 1
		})
	}()
	select {
	case <-connected:
	case <-announced:
		t.Fatal("the instance stream ended before it began")
	}

	var created locatedPty[ptyJSON]
	n.must(200, "POST", "/api/pty", bashBody).decode(t, &created)
	id, ws := created.Data.ID, created.Location.Directory
	if !strings.HasPrefix(id, "pty") || created.Data.Status != "running" || created.Data.Pid <= 0 || created.Data.Cwd != ws || ws == "" {
		t.Fatalf("created: %+v", created)
	}
	var list locatedPty[[]ptyJSON]
	n.must(200, "GET", "/api/pty", nil).decode(t, &list)
	if len(list.Data) != 1 || list.Data[0].ID != id || list.Location.Directory != ws {
		t.Errorf("list: %+v", list)
	}
	var got locatedPty[ptyJSON]
	n.must(200, "GET", "/api/pty/"+id, nil).decode(t, &got)
	if got.Data.ID != id || got.Data.Status != "running" {
		t.Errorf("get: %+v", got)
	}
	var updated locatedPty[ptyJSON]
	n.must(200, "PUT", "/api/pty/"+id, map[string]any{"title": "v2", "size": map[string]int{"rows": 30, "cols": 100}}).decode(t, &updated)
	if updated.Data.Title != "v2" {
		t.Errorf("update: %+v", updated)
	}
	if a := n.do("PUT", "/api/pty/"+id, map[string]any{"size": map[string]int{"rows": 0, "cols": 100}}); a.status != 400 {
		t.Errorf("a size of 0 rows: %d %s", a.status, a.body)
	} else if tag, _ := tagOf(t, a); tag != "InvalidRequestError" {
		t.Errorf("a size of 0 rows: %s", a.body)
	}

	n.typeInto("/api/pty/" + id + "/connect?cursor=0")
	if a := n.send("POST", "/api/pty/"+id+"/connect-token", nil); a.status != 403 {
		t.Errorf("a ticket without opencode's header: %d %s", a.status, a.body)
	} else if tag, _ := tagOf(t, a); tag != "ForbiddenError" {
		t.Errorf("a ticket without opencode's header: %s", a.body)
	}
	var tk locatedPty[struct {
		Ticket    string `json:"ticket"`
		ExpiresIn int    `json:"expires_in"`
	}]
	a := n.send("POST", "/api/pty/"+id+"/connect-token", map[string]string{"x-opencode-ticket": "1"})
	if a.status != 200 {
		t.Fatalf("ticket: %d %s", a.status, a.body)
	}
	a.decode(t, &tk)
	if tk.Data.Ticket == "" || tk.Data.ExpiresIn != 60 || tk.Location.Directory != ws {
		t.Errorf("ticket: %s", a.body)
	}
	n.typeInto("/api/pty/" + id + "/connect?ticket=" + tk.Data.Ticket)
	if a := n.upgrade("/api/pty/" + id + "/connect?ticket=" + tk.Data.Ticket); a.status != 403 {
		t.Errorf("a spent ticket: %d %s", a.status, a.body)
	} else if tag, msg := tagOf(t, a); tag != "ForbiddenError" || !strings.Contains(msg, "/api/pty/") {
		t.Errorf("a spent ticket: %s", a.body)
	}
	if a := n.upgrade("/api/pty/" + id + "/connect?cursor=x"); a.status != 400 {
		t.Errorf("a bad cursor: %d %s", a.status, a.body)
	}
	if a := n.do("GET", "/api/pty/"+id+"/connect", nil); a.status != 400 || !strings.Contains(string(a.body), "is a websocket") {
		t.Errorf("not a websocket: %d %s", a.status, a.body)
	}

	if a := n.do("DELETE", "/api/pty/"+id, nil); a.status != 204 || len(a.body) != 0 {
		t.Errorf("remove: %d %s", a.status, a.body)
	}
	for _, p := range []string{"/api/pty/" + id, "/api/pty/" + id + "/connect"} {
		a := n.do("GET", p, nil)
		var e struct {
			Tag   string `json:"_tag"`
			PtyID string `json:"ptyID"`
		}
		if json.Unmarshal(a.body, &e); a.status != 404 || e.Tag != "PtyNotFoundError" || e.PtyID != id {
			t.Errorf("GET %s after remove: %d %s", p, a.status, a.body)
		}
	}
	if a := n.do("DELETE", "/api/pty/"+id, nil); a.status != 404 {
		t.Errorf("remove twice: %d %s", a.status, a.body)
	}
	<-announced
	for _, typ := range []string{"pty.created", "pty.updated", "pty.deleted"} {
		if count(streamed, typ) == 0 {
			t.Errorf("no %s on /api/event", typ)
		}
	}
}

// TestTerminalsV2OffByDefault: unless the operator turned terminals on,
// every /api/pty route refuses with 403 in opencode 2's error shape, and
// says how to turn them on; the websocket too.
func TestTerminalsV2OffByDefault(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	for _, rt := range [][2]string{{"GET", "/api/pty"}, {"POST", "/api/pty"}, {"GET", "/api/pty/pty_x"}, {"PUT", "/api/pty/pty_x"},
		{"DELETE", "/api/pty/pty_x"}, {"POST", "/api/pty/pty_x/connect-token"}, {"GET", "/api/pty/pty_x/connect"}} {
		var body any
		if rt[0] == "POST" || rt[0] == "PUT" {
			body = map[string]any{"title": "t"}
		}
		a := n.do(rt[0], rt[1], body)
		if tag, msg := tagOf(t, a); a.status != 403 || tag != "ForbiddenError" || !strings.Contains(msg, `"terminal": {"enabled": true}`) {
			t.Errorf("%s %s: %d %s", rt[0], rt[1], a.status, a.body)
		}
	}
	if a := n.upgrade("/api/pty/pty_x/connect"); a.status != 403 {
		t.Errorf("websocket: %d %s", a.status, a.body)
	}
}

// TestTerminalsOneServiceBothAPIs: a terminal made through either API is
// the other's: listed, read, typed into, its ticket honoured and removed
// through both.
func TestTerminalsOneServiceBothAPIs(t *testing.T) {
	t.Parallel()
	n := startNode(t, withTerminals)
	var v1 ptyJSON
	n.must(200, "POST", "/pty", bashBody).decode(t, &v1)
	var v2 locatedPty[ptyJSON]
	n.must(200, "POST", "/api/pty", bashBody).decode(t, &v2)

	var v2list locatedPty[[]ptyJSON]
	n.must(200, "GET", "/api/pty", nil).decode(t, &v2list)
	var v1list []ptyJSON
	n.must(200, "GET", "/pty", nil).decode(t, &v1list)
	ids := func(l []ptyJSON) string {
		var s []string
		for _, p := range l {
			s = append(s, p.ID)
		}
		return strings.Join(s, ",")
	}
	if ids(v2list.Data) != ids(v1list) || !strings.Contains(ids(v1list), v1.ID) || !strings.Contains(ids(v1list), v2.Data.ID) {
		t.Fatalf("v1 lists %s, v2 lists %s; want both %s and %s", ids(v1list), ids(v2list.Data), v1.ID, v2.Data.ID)
	}
	var got locatedPty[ptyJSON]
	n.must(200, "GET", "/api/pty/"+v1.ID, nil).decode(t, &got)
	if got.Data.ID != v1.ID || got.Data.Cwd != v1.Cwd {
		t.Errorf("v1's terminal through v2: %+v, want %+v", got.Data, v1)
	}
	n.must(200, "GET", "/pty/"+v2.Data.ID, nil)

	// A v2 ticket opens v1's websocket and the other way round.
	ticket := func(path string) string {
		var tk struct {
			Ticket string `json:"ticket"`
			Data   struct {
				Ticket string `json:"ticket"`
			} `json:"data"`
		}
		a := n.send("POST", path, map[string]string{"x-opencode-ticket": "1"})
		if a.status != 200 {
			t.Fatalf("POST %s: %d %s", path, a.status, a.body)
		}
		a.decode(t, &tk)
		return tk.Ticket + tk.Data.Ticket
	}
	n.typeInto("/pty/" + v1.ID + "/connect?ticket=" + ticket("/api/pty/"+v1.ID+"/connect-token"))
	n.typeInto("/api/pty/" + v2.Data.ID + "/connect?ticket=" + ticket("/pty/"+v2.Data.ID+"/connect-token"))

	n.must(204, "DELETE", "/api/pty/"+v1.ID, nil)
	n.must(404, "GET", "/pty/"+v1.ID, nil)
	n.must(200, "DELETE", "/pty/"+v2.Data.ID, nil)
	n.must(404, "GET", "/api/pty/"+v2.Data.ID, nil)
}
