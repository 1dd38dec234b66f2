package pty_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/testenv"
	"github.com/agentd/agentd/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a started manager and a server for its websockets.
type fixture struct {
	m   *pty.Manager
	srv *httptest.Server
	dir string
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFixture(t *testing.T, cfg pty.Config) *fixture {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := pty.New(cfg)
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := newServer(m)
	t.Cleanup(func() {
		m.Stop()
		srv.Close()
	})
	return &fixture{m: m, srv: srv, dir: dir}
}

// newServer serves the manager's websockets.
func newServer(m *pty.Manager) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pty/{id}/connect", func(w http.ResponseWriter, r *http.Request) {
		cursor, err := pty.ParseCursor(r.URL.Query().Get("cursor"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := m.Connect(w, r, r.PathValue("id"), cursor); err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
		}
	})
	return httptest.NewServer(mux)
}

// shell is an interactive bash that reads no startup file.
var shell = pty.CreateInput{Command: "/bin/bash", Args: []string{"--norc", "--noprofile", "-i"}, Env: map[string]string{"PS1": "$ "}}

func (f *fixture) create(t *testing.T, in pty.CreateInput) pty.Info {
	t.Helper()
	in.Dir = f.dir
	info, err := f.m.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// client is one websocket to a terminal: the text it received, and the
// cursor frames.
type client struct {
	t      *testing.T
	c      *websocket.Conn
	text   strings.Builder
	metas  []int64
	closed *websocket.CloseError
	// before is the text received before the first cursor frame.
	before string
}

func (f *fixture) dial(t *testing.T, id, cursor string) *client {
	t.Helper()
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/pty/" + id + "/connect"
	if cursor != "" {
		u += "?cursor=" + cursor
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 24)
	cl := &client{t: t, c: c}
	t.Cleanup(func() { c.CloseNow() })
	return cl
}

// next reads one frame; it reports false once the socket is closed.
func (c *client) next(ctx context.Context) bool {
	typ, data, err := c.c.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			c.closed = &ce
		}
		if ctx.Err() != nil {
			c.t.Fatalf("no more output within the deadline; got %q", c.text.String())
		}
		return false
	}
	if typ == websocket.MessageBinary && len(data) > 0 && data[0] == 0 {
		var meta struct{ Cursor int64 }
		if err := json.Unmarshal(data[1:], &meta); err != nil {
			c.t.Fatalf("cursor frame %q: %v", data, err)
		}
		if len(c.metas) == 0 {
			c.before = c.text.String()
		}
		c.metas = append(c.metas, meta.Cursor)
		return true
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("output in a %v frame", typ)
	}
	c.text.Write(data)
	return true
}

// until reads until the text holds s.
func (c *client) until(s string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 15*time.Second)
	defer cancel()
	for !strings.Contains(c.text.String(), s) {
		if !c.next(ctx) {
			c.t.Fatalf("closed before %q; got %q", s, c.text.String())
		}
	}
}

// replayed reads until the cursor frame that ends the replay.
func (c *client) replayed() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 15*time.Second)
	defer cancel()
	for len(c.metas) == 0 {
		if !c.next(ctx) {
			c.t.Fatalf("closed before the cursor frame; got %q", c.text.String())
		}
	}
}

// number reads until the text holds key=N on a line of its own, and
// returns N.
func (c *client) number(key string) int {
	c.t.Helper()
	re := regexp.MustCompile(key + `=(\d+)\r`)
	ctx, cancel := context.WithTimeout(c.t.Context(), 15*time.Second)
	defer cancel()
	for {
		if m := re.FindStringSubmatch(c.text.String()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		if !c.next(ctx) {
			c.t.Fatalf("closed before %s=; got %q", key, c.text.String())
		}
	}
}

// drain reads until the socket is closed.
func (c *client) drain() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 15*time.Second)
	defer cancel()
	for c.next(ctx) {
	}
}

func (c *client) send(s string) {
	c.t.Helper()
	if err := c.c.Write(c.t.Context(), websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// cursor is where the client is: its last cursor frame plus the UTF-16
// length of what came after it, as opencode's web app counts.
func (c *client) cursor() int64 {
	after := strings.TrimPrefix(c.text.String(), c.before)
	return c.metas[0] + int64(len(utf16.Encode([]rune(after))))
}

// TestEchoOverWebsocket: a terminal runs a real shell in a real
// pseudo-terminal in its workspace; what the client types runs and its
// output comes back over the websocket.
func TestEchoOverWebsocket(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{})
	info := f.create(t, shell)
	if info.Status != pty.StatusRunning || info.Pid <= 0 || info.Cwd != f.dir || !strings.HasPrefix(info.ID, "pty_") {
		t.Fatalf("info: %+v", info)
	}
	c := f.dial(t, info.ID, "")
	c.send("echo h$((1))i; tty; pwd\n")
	c.until("h1i\r\n")
	c.until("\n" + f.dir + "\r\n")
	if !strings.Contains(c.text.String(), "/dev/pts/") {
		t.Errorf("the shell's standard input is not a terminal: %q", c.text.String())
	}
	if len(c.metas) != 1 {
		t.Errorf("cursor frames: %v", c.metas)
	}
	if got := f.m.List(f.dir); len(got) != 1 || got[0].ID != info.ID {
		t.Errorf("list: %+v", got)
	}
	if got := f.m.List("/elsewhere"); len(got) != 0 {
		t.Errorf("another directory's list: %+v", got)
	}
}

// TestResize: a new size reaches the terminal.
func TestResize(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{})
	info := f.create(t, shell)
	c := f.dial(t, info.ID, "")
	got, err := f.m.Update(info.ID, pty.UpdateInput{Title: "build", Size: &pty.Size{Rows: 33, Cols: 111}})
	if err != nil || got.Title != "build" {
		t.Fatalf("update: %+v %v", got, err)
	}
	c.send("stty size\n")
	c.until("33 111")
	if err := f.m.Resize(info.ID, pty.Size{Rows: 0, Cols: 10}); err == nil {
		t.Error("a size of 0 rows was taken")
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

// waitDead waits until none of pids is alive.
func waitDead(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// startJobs has the terminal start a background job and one that left
// its session and process group, and returns their pids and the shell's.
func startJobs(t *testing.T, f *fixture, info pty.Info) []int {
	t.Helper()
	c := f.dial(t, info.ID, "")
	c.send(`sleep 1000 & echo "bg=$!"; setsid sh -c 'echo "sid=$$"; exec sleep 1001' & echo started` + "\n")
	pids := []int{info.Pid}
	for _, key := range []string{"bg", "sid"} {
		pids = append(pids, c.number(key))
	}
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("process %d is not running before the removal", p)
		}
	}
	return pids
}

// TestRemoveKillsEverything: removing a terminal kills its shell, a
// background job, and a process that left its session; the terminal is
// forgotten and its websocket closed.
func TestRemoveKillsEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{})
	info := f.create(t, shell)
	pids := startJobs(t, f, info)
	watcher := f.dial(t, info.ID, "-1")
	if err := f.m.Remove(info.ID); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pids...)
	if _, err := f.m.Get(info.ID); !errors.Is(err, pty.ErrNotFound) {
		t.Errorf("get after remove: %v", err)
	}
	if err := f.m.Remove(info.ID); !errors.Is(err, pty.ErrNotFound) {
		t.Errorf("second remove: %v", err)
	}
	watcher.drain()
	if watcher.closed == nil || watcher.closed.Code != websocket.StatusNormalClosure {
		t.Errorf("websocket closed with %+v, want 1000", watcher.closed)
	}
}

// TestStopKillsEverything: stopping the manager kills every terminal and
// what each started, closes the websockets (going away), and refuses new
// terminals.
func TestStopKillsEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{})
	var pids []int
	for range 2 {
		pids = append(pids, startJobs(t, f, f.create(t, shell))...)
	}
	watcher := f.dial(t, f.m.List("")[0].ID, "-1")
	watcher.replayed()
	// The client reads while the server stops, as a browser answers
	// the server's close at once.
	closed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := watcher.c.Read(t.Context()); err != nil {
				closed <- err
				return
			}
		}
	}()
	f.m.Stop()
	waitDead(t, pids...)
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("websocket closed with %v, want 1001", err)
	}
	if _, err := f.m.Create(pty.CreateInput{Dir: f.dir}); !errors.Is(err, pty.ErrStopped) {
		t.Errorf("create after stop: %v", err)
	}
	f.m.Stop()
}

// waitExited waits until the terminal's shell has ended.
func waitExited(t *testing.T, m *pty.Manager, id string) pty.Info {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := m.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == pty.StatusExited {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("terminal %s still running", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExitKeepsOutput: a terminal whose shell ended is kept, with its
// exit code and its output, until it is removed; a client that connects
// then gets the output and a normal close.
func TestExitKeepsOutput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{})
	info := f.create(t, pty.CreateInput{Command: "/bin/sh", Args: []string{"-c", "echo bye; exit 3"}})
	got := waitExited(t, f.m, info.ID)
	if got.ExitCode == nil || *got.ExitCode != 3 {
		t.Fatalf("exit code: %+v", got)
	}
	if err := f.m.Write(info.ID, []byte("ignored\n")); err != nil {
		t.Errorf("writing to an exited terminal: %v", err)
	}
	c := f.dial(t, info.ID, "0")
	c.drain()
	if !strings.Contains(c.text.String(), "bye") || c.closed == nil || c.closed.Code != websocket.StatusNormalClosure {
		t.Errorf("got %q, closed %+v", c.text.String(), c.closed)
	}
}

// TestReconnectReplays: a client that reconnects with the cursor it
// counted gets exactly what it missed; one that connects from 0 gets all
// that is kept; -1 gets only what comes next.
func TestReconnectReplays(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{})
	info := f.create(t, shell)
	first := f.dial(t, info.ID, "")
	first.send("echo one-é-😀-$((1+1))\n")
	first.until("one-é-😀-2\r\n")
	cursor := first.cursor()
	first.c.Close(websocket.StatusNormalClosure, "")

	if err := f.m.Write(info.ID, []byte("echo two-$((2))\n")); err != nil {
		t.Fatal(err)
	}
	again := f.dial(t, info.ID, strconv.FormatInt(cursor, 10))
	again.until("two-2\r\n")
	if strings.Contains(again.text.String(), "one") {
		t.Errorf("the reconnect replayed what the client had: %q", again.text.String())
	}
	all := f.dial(t, info.ID, "0")
	all.replayed()
	if !strings.Contains(all.before, "one-é-😀-2") || !strings.Contains(all.before, "two-2") {
		t.Errorf("replay from 0: %q", all.before)
	}
	if want := int64(len(utf16.Encode([]rune(all.before)))); all.metas[0] != want {
		t.Errorf("cursor frame %d, want the UTF-16 length of the replay, %d", all.metas[0], want)
	}
	live := f.dial(t, info.ID, "-1")
	live.replayed()
	live.send("echo three-$((3))\n")
	live.until("three-3\r\n")
	if live.before != "" || strings.Contains(live.text.String(), "two") {
		t.Errorf("-1 replayed %q", live.text.String())
	}
}

// TestReplayIsBounded: a terminal keeps only the newest Buffer bytes of
// its output (about: whole chunks go), and says where they start.
func TestReplayIsBounded(t *testing.T) {
	t.Parallel()
	const buffer = 64 << 10
	f := newFixture(t, pty.Config{Buffer: buffer})
	info := f.create(t, pty.CreateInput{Command: "/bin/sh", Args: []string{"-c", `head -c 300000 /dev/zero | tr '\0' x; echo; echo END`}})
	waitExited(t, f.m, info.ID)
	c := f.dial(t, info.ID, "0")
	c.drain()
	n := len(c.before)
	if n > buffer || n < buffer/2 || !strings.HasSuffix(c.before, "END\r\n") {
		t.Errorf("replayed %d bytes ending %q, want at most %d, the newest", n, c.before[max(0, n-20):], buffer)
	}
	if c.metas[0] < 300000 {
		t.Errorf("cursor %d: it counts all the output, not what is kept", c.metas[0])
	}
}

// TestBadInput: what a client can get wrong is refused, naming it.
func TestBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pty.Config{Max: 1})
	var ie *pty.InputError
	for name, in := range map[string]pty.CreateInput{
		"cwd outside":   {Cwd: "/tmp"},
		"cwd escapes":   {Cwd: "../"},
		"no command":    {Command: "no-such-program-here"},
		"bad variable":  {Env: map[string]string{"A=B": "c"}},
		"long title":    {Title: strings.Repeat("x", 2000)},
		"no workspace!": {},
	} {
		if name != "no workspace!" {
			in.Dir = f.dir
		}
		if _, err := f.m.Create(in); !errors.As(err, &ie) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// One terminal at most: a second is refused while the first runs,
	// and takes the place of the first once it has exited.
	first := f.create(t, pty.CreateInput{Command: "/bin/sh", Args: []string{"-c", "read x"}})
	if _, err := f.m.Create(pty.CreateInput{Dir: f.dir}); !errors.As(err, &ie) {
		t.Errorf("past the limit: %v", err)
	}
	f.m.Write(first.ID, []byte("\n"))
	waitExited(t, f.m, first.ID)
	second := f.create(t, pty.CreateInput{Command: "/bin/sh", Args: []string{"-c", "true"}})
	if list := f.m.List(""); len(list) != 1 || list[0].ID != second.ID {
		t.Errorf("list: %+v", list)
	}
}

// TestTerminalIsConfined: a terminal is a shell nobody's rules judge, so
// the sandbox holds it as it holds the model's commands: it writes in its
// workspace and temporary directory and nowhere else, and cannot read
// what the server hides (its database).
func TestTerminalIsConfined(t *testing.T) {
	if sandbox.ABI() < 1 {
		testenv.Skip(t, testenv.Landlock(1), "terminals are confined by Landlock")
	}
	t.Parallel()
	secret, outside := t.TempDir(), t.TempDir()
	db := filepath.Join(secret, "agentd.db")
	if err := os.WriteFile(db, []byte("SQLite format 3"), 0o600); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Hidden: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, pty.Config{Sandbox: sb})
	script := `echo x > "$OUT/f" && echo ESCAPED; cat "$DB" && echo READ-DB; ` +
		`echo ok > inside.txt && echo INSIDE-OK; echo t > "$TMPDIR/t" && echo TMP-OK`
	info := f.create(t, pty.CreateInput{Command: "/bin/sh", Args: []string{"-c", script}, Env: map[string]string{"OUT": outside, "DB": db}})
	waitExited(t, f.m, info.ID)
	c := f.dial(t, info.ID, "0")
	c.drain()
	out := c.text.String()
	for _, bad := range []string{"ESCAPED", "SQLite", "READ-DB"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: %q", bad, out)
		}
	}
	for _, good := range []string{"INSIDE-OK", "TMP-OK"} {
		if !strings.Contains(out, good) {
			t.Errorf("no %s: %q", good, out)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("the terminal wrote outside its workspace")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "inside.txt")); err != nil {
		t.Errorf("the terminal could not write in its workspace: %v", err)
	}
}

// TestTerminalEnvironment: a terminal gets the tools' allow-listed
// environment (no server secret, no variable nobody listed), the client's
// variables, a terminal type, and the container's marker, which a client
// cannot replace.
func TestTerminalEnvironment(t *testing.T) {
	t.Setenv("AGENTD_PTY_TEST_SECRET", "s3cret")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	f := newFixture(t, pty.Config{Env: tool.NewEnv(nil, nil), Scope: "ptytest"})
	info := f.create(t, pty.CreateInput{Command: "/bin/sh",
		Args: []string{"-c", `echo "[$AGENTD_PTY_TEST_SECRET][$OPENAI_API_KEY][$TERM][$AGENTD_TOOL][$FROM_CLIENT]"`},
		Env:  map[string]string{"FROM_CLIENT": "yes", "AGENTD_TOOL": "forged", "TERM": "dumb"}})
	waitExited(t, f.m, info.ID)
	c := f.dial(t, info.ID, "0")
	c.drain()
	if want := "[][][xterm-256color][ptytest/" + info.ID + "][yes]"; !strings.Contains(c.text.String(), want) {
		t.Errorf("got %q, want %s", c.text.String(), want)
	}
}
