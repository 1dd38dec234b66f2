package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/testenv"
)

// startTerminals starts a node whose operator turned terminals on, with
// its workspace.
func startTerminals(t *testing.T, sec server.Security) (*app.App, string) {
	a, ws, _ := startTerminalsDB(t, sec)
	return a, ws
}

// startTerminalsDB is startTerminals that also says where the database is.
func startTerminalsDB(t *testing.T, sec server.Security) (*app.App, string, string) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "a.db")
	a, err := app.Start(t.Context(), app.Config{
		DBPath: db, Host: "127.0.0.1", Version: "test",
		Directory: ws, Security: sec, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Terminals: app.Terminals{Enabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.WithoutCancel(t.Context())) })
	return a, ws, db
}

// bash is a terminal's body: an interactive bash without startup files.
const bash = `{"command":"/bin/bash","args":["--norc","--noprofile","-i"],"env":{"PS1":"$ "}}`

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func createTerminal(t *testing.T, a *app.App, hdr map[string]string) string {
	t.Helper()
	r := call(t, "POST", a.URL()+"/pty", bash, hdr)
	if r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var info struct{ ID, Status string }
	json.Unmarshal(r.body, &info)
	if info.Status != "running" {
		t.Fatalf("created: %s", r.body)
	}
	return info.ID
}

// upgrade asks for a websocket without speaking it: the answer to a
// refused upgrade; an accepted one is a 101, its connection dropped.
func upgrade(t *testing.T, url string, hdr map[string]string) resp {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
		"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
		req.Header.Set(k, v)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode == http.StatusSwitchingProtocols {
		return resp{status: r.StatusCode, header: r.Header}
	}
	b, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, b, r.Header}
}

// echo dials the terminal's websocket and checks that a command typed
// into it runs.
func echo(t *testing.T, url string, hdr http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("echo hi-$((40+2))\n")); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for !strings.Contains(got.String(), "hi-42") {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v; got %q", err, got.String())
		}
		if typ == websocket.MessageText {
			got.Write(data)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// TestTerminalsOffByDefault: a terminal is a shell; unless the operator
// turned terminals on, every terminal route refuses with a body that says
// how to turn them on, the websocket included.
func TestTerminalsOffByDefault(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	u := a.URL()
	for _, rt := range [][2]string{{"GET", "/pty"}, {"POST", "/pty"}, {"GET", "/pty/shells"}, {"GET", "/pty/pty_x"},
		{"PUT", "/pty/pty_x"}, {"DELETE", "/pty/pty_x"}, {"POST", "/pty/pty_x/connect-token"}, {"GET", "/pty/pty_x/connect"}} {
		body := ""
		if rt[0] == "POST" || rt[0] == "PUT" {
			body = "{}"
		}
		r := call(t, rt[0], u+rt[1], body, map[string]string{"x-opencode-ticket": "1"})
		name, msg := errorName(t, r.body)
		if r.status != http.StatusForbidden || name != "PtyForbiddenError" || !strings.Contains(msg, `"terminal": {"enabled": true}`) {
			t.Errorf("%s %s: %d %s", rt[0], rt[1], r.status, r.body)
		}
	}
	if r := upgrade(t, u+"/pty/pty_x/connect", nil); r.status != http.StatusForbidden {
		t.Errorf("websocket: %d %s", r.status, r.body)
	}
}

// TestTerminalRoutes: create, list, get, resize, type over the websocket,
// remove; a directory's list holds its own terminals only; a working
// directory outside the workspace is refused.
func TestTerminalRoutes(t *testing.T) {
	t.Parallel()
	a, ws := startTerminals(t, server.Security{LoopbackOnly: true})
	u := a.URL()
	id := createTerminal(t, a, nil)
	var list []struct{ ID, Cwd string }
	if r := call(t, "GET", u+"/pty", "", nil); r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list) != 1 || list[0].ID != id || list[0].Cwd != ws {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	other := t.TempDir()
	if r := call(t, "GET", u+"/pty?directory="+other, "", nil); r.status != 200 || string(r.body) != "[]\n" {
		t.Errorf("another directory's list: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", u+"/pty/"+id, `{"title":"t","size":{"rows":30,"cols":100}}`, nil); r.status != 200 || !strings.Contains(string(r.body), `"title":"t"`) {
		t.Errorf("update: %d %s", r.status, r.body)
	}
	if r := call(t, "PUT", u+"/pty/"+id, `{"size":{"rows":0,"cols":100}}`, nil); r.status != 400 {
		t.Errorf("a size of 0 rows: %d %s", r.status, r.body)
	}
	echo(t, u+"/pty/"+id+"/connect?cursor=0", nil)
	if r := upgrade(t, u+"/pty/"+id+"/connect?cursor=x", nil); r.status != 400 {
		t.Errorf("a bad cursor: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", u+"/pty/"+id+"/connect", "", nil); r.status != 400 || !strings.Contains(string(r.body), "is a websocket") {
		t.Errorf("not a websocket: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", u+"/pty", `{"cwd":"`+other+`"}`, nil); r.status != 400 {
		t.Errorf("cwd outside the workspace: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", u+"/pty/shells", "", nil); r.status != 200 || !strings.Contains(string(r.body), `"acceptable":true`) {
		t.Errorf("shells: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", u+"/pty/"+id, "", nil); r.status != 200 || string(r.body) != "true\n" {
		t.Errorf("remove: %d %s", r.status, r.body)
	}
	r := call(t, "GET", u+"/pty/"+id, "", nil)
	if name, _ := errorName(t, r.body); r.status != 404 || name != "PtyNotFoundError" {
		t.Errorf("get after remove: %d %s", r.status, r.body)
	}
	if r := upgrade(t, u+"/pty/"+id+"/connect", nil); r.status != 404 {
		t.Errorf("connect after remove: %d %s", r.status, r.body)
	}
}

// TestTerminalWebsocketGuards: the websocket is behind the same checks as
// every route (password, Host, Origin); a connect ticket, asked for with
// the password and opencode's header, stands for the password once, for
// its own terminal only.
func TestTerminalWebsocketGuards(t *testing.T) {
	t.Parallel()
	a, _ := startTerminals(t, server.Security{LoopbackOnly: true, Password: "pw"})
	u := a.URL()
	auth := map[string]string{"Authorization": basic("opencode", "pw")}
	id := createTerminal(t, a, auth)
	other := createTerminal(t, a, auth)
	connect := u + "/pty/" + id + "/connect"

	if r := upgrade(t, connect, nil); r.status != http.StatusUnauthorized {
		t.Errorf("without the password: %d %s", r.status, r.body)
	}
	if r := upgrade(t, connect, map[string]string{"Authorization": basic("opencode", "pw"), "Origin": "http://evil.example"}); r.status != http.StatusForbidden {
		t.Errorf("from another origin: %d %s", r.status, r.body)
	}
	if r := upgrade(t, connect, map[string]string{"Authorization": basic("opencode", "pw"), "Host": "evil.example"}); r.status != http.StatusForbidden {
		t.Errorf("through another host name: %d %s", r.status, r.body)
	}
	echo(t, connect, http.Header{"Authorization": {basic("opencode", "pw")}})

	ticket := func(pty string, hdr map[string]string) (int, string) {
		r := call(t, "POST", u+"/pty/"+pty+"/connect-token", "", hdr)
		var tk struct {
			Ticket    string `json:"ticket"`
			ExpiresIn int    `json:"expires_in"`
		}
		json.Unmarshal(r.body, &tk)
		if r.status == 200 && tk.ExpiresIn != 60 {
			t.Errorf("ticket: %s", r.body)
		}
		return r.status, tk.Ticket
	}
	if code, _ := ticket(id, auth); code != http.StatusForbidden {
		t.Errorf("a ticket without opencode's header: %d", code)
	}
	withHeader := map[string]string{"Authorization": basic("opencode", "pw"), "x-opencode-ticket": "1"}
	if code, _ := ticket(id, map[string]string{"x-opencode-ticket": "1"}); code != http.StatusUnauthorized {
		t.Errorf("a ticket without the password: %d", code)
	}
	_, tk := ticket(id, withHeader)
	echo(t, connect+"?ticket="+tk, nil)
	if r := upgrade(t, connect+"?ticket="+tk, nil); r.status != http.StatusForbidden {
		t.Errorf("a spent ticket: %d %s", r.status, r.body)
	}
	_, tk = ticket(id, withHeader)
	if r := upgrade(t, u+"/pty/"+other+"/connect?ticket="+tk, nil); r.status != http.StatusForbidden {
		t.Errorf("a ticket on another terminal: %d %s", r.status, r.body)
	}
	if r := upgrade(t, connect+"?ticket="+tk, nil); r.status != http.StatusForbidden {
		t.Errorf("a ticket tried elsewhere first: %d %s", r.status, r.body)
	}
	_, tk = ticket(id, withHeader)
	if r := upgrade(t, connect+"?ticket="+tk, map[string]string{"Origin": "http://evil.example"}); r.status != http.StatusForbidden {
		t.Errorf("a ticket from another origin: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", u+"/pty/"+id+"?ticket="+tk, "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a ticket on another route: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", u+"/pty/"+id+"/connect?ticket="+tk, "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a ticket with another method: %d %s", r.status, r.body)
	}
}

// TestServerStopEndsTerminals: stopping the server kills every terminal
// and what it started, a process that left the terminal's session
// included.
func TestServerStopEndsTerminals(t *testing.T) {
	t.Parallel()
	a, ws := startTerminals(t, server.Security{LoopbackOnly: true})
	pidFile := filepath.Join(ws, "pids")
	r := call(t, "POST", a.URL()+"/pty", `{"command":"/bin/sh","args":["-c","sleep 1000 & echo $! > pids; setsid sh -c 'echo $$ >> pids; exec sleep 1001' & echo $$ >> pids; wait"]}`, nil)
	if r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("pids: %v", pids)
		}
		time.Sleep(10 * time.Millisecond)
		b, _ := os.ReadFile(pidFile)
		pids = pids[:0]
		for _, f := range regexp.MustCompile(`\d+`).FindAllString(string(b), -1) {
			n, _ := strconv.Atoi(f)
			pids = append(pids, n)
		}
	}
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	dead := func(p int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		return syscall.Kill(p, 0) != nil || err != nil || strings.Contains(string(b), ") Z ")
	}
	deadline = time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for !dead(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived the server", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestTerminalConfinedByTheNode: a node's terminals run in its sandbox,
// which hides its database: a terminal can neither read it nor write
// outside its workspace.
func TestTerminalConfinedByTheNode(t *testing.T) {
	if sandbox.ABI() < 1 {
		testenv.Skip(t, testenv.Landlock(1), "terminals are confined by Landlock")
	}
	t.Parallel()
	a, ws, db := startTerminalsDB(t, server.Security{LoopbackOnly: true})
	outside := t.TempDir()
	body, _ := json.Marshal(map[string]any{"command": "/bin/sh", "args": []string{"-c",
		`head -c 16 "$DB" > stolen; echo x > "$OUT/f"; echo done > finished`},
		"env": map[string]string{"DB": db, "OUT": outside}})
	if r := call(t, "POST", a.URL()+"/pty", string(body), nil); r.status != 200 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(ws, "finished")); string(b) == "done\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminal's command did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "stolen")); len(b) > 0 {
		t.Errorf("the terminal read the database: %q", b)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("the terminal wrote outside its workspace")
	}
}
