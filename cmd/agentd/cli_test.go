package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	pngenc "image/png"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/testbin"
	"github.com/agentd/agentd/internal/testenv"
	"golang.org/x/sys/unix"
)

// The tests drive the built binary as a user would: its exit codes,
// signals, terminal and environment are the real ones.
// cli is one isolated user: their own home, configuration and data
// directories, and a working directory.
type cli struct {
	t   *testing.T
	dir string
	env []string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	testenv.SkipShort(t)
	root := t.TempDir()
	dir := filepath.Join(root, "work")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, dir: dir}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "AGENTD_"), strings.HasPrefix(k, "OPENAI_"), strings.HasPrefix(k, "ANTHROPIC_"),
			strings.HasPrefix(k, "OPENCODE_"), strings.HasPrefix(k, "XDG_"), k == "HOME":
			continue
		}
		c.env = append(c.env, kv)
	}
	c.env = append(c.env, "HOME="+filepath.Join(root, "home"),
		"XDG_CONFIG_HOME="+filepath.Join(root, "config"), "XDG_DATA_HOME="+filepath.Join(root, "data"))
	return c
}

func (c *cli) setenv(kv ...string) { c.env = append(c.env, kv...) }

func (c *cli) write(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, testbin.Agentd(c.t), args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	return cmd
}

// run runs agentd with stdin from /dev/null (no terminal).
func (c *cli) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.command(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func (c *cli) mustRun(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("agentd %s: %s", strings.Join(args, " "), r)
	}
	return r
}

func TestMainHelpAndUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	for _, name := range []string{"serve", "run", "sessions", "status", "wait", "events", "abort", "key", "config", "plugin", "bench", "fakellm", "version"} {
		r := c.run(name, "-h")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: agentd "+name) || !strings.Contains(r.stdout, "exit codes:") {
			t.Errorf("%s -h: %s", name, r)
		}
		if name != "version" && !strings.Contains(r.stdout, "examples:\n  agentd ") && !strings.Contains(r.stdout, "examples:\n  "+"OPENAI") {
			t.Errorf("%s -h has no example:\n%s", name, r.stdout)
		}
	}
	// plugin list names the folder beside the database and what it lacks.
	if r := c.run("plugin", "list", "--db", filepath.Join(t.TempDir(), "x.db")); r.code != 0 || !strings.Contains(r.stdout, "bun") ||
		!strings.Contains(r.stdout, "none configured") {
		t.Errorf("plugin list: %s", r)
	}
	if r := c.run("help", "wait"); r.code != 0 || !strings.Contains(r.stdout, "124") {
		t.Errorf("help wait: %s", r)
	}
	// Flags after a stray word are not silently dropped.
	r := c.run("serve", "stray", "--port", "1")
	if r.code != 2 || !strings.Contains(r.stderr, `serve takes no arguments, got "stray"`) {
		t.Errorf("serve stray: %s", r)
	}
	for _, args := range [][]string{{"wait"}, {"wait", "a", "b"}, {"serve", "--nope"}, {"run"}, {"nope"}, {"config", "fix"}} {
		if r := c.run(args...); r.code != 2 || r.stderr == "" {
			t.Errorf("%v: %s", args, r)
		}
	}
}

// TestClientErrorsSayWhatToDo: no server there, and one error prefix.
func TestClientErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("sessions", "--url", "http://127.0.0.1:1")
	if r.code != 1 || !strings.Contains(r.stderr, "no agentd answers at http://127.0.0.1:1") ||
		!strings.Contains(r.stderr, "agentd serve") || !strings.Contains(r.stderr, "AGENTD_URL") {
		t.Errorf("refused connection: %s", r)
	}
	url := startServer(t)
	r = c.run("status", "--url", url, "ses_nope")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "agentd: session ses_nope not found (404 NotFoundError)") || strings.Contains(r.stderr, "agentd: agentd") {
		t.Errorf("unknown session: %s", r)
	}
}

func startServer(t *testing.T) string {
	t.Helper()
	a, err := app.Start(context.Background(), app.Config{DBPath: filepath.Join(t.TempDir(), "agentd.db"), Host: "127.0.0.1",
		Version: "test", Directory: t.TempDir(), Security: serverSecurityLoopback(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	return a.URL()
}

// TestSessionsAndStatusForPeople: a table with status and last outcome;
// a sentence for one session; JSON on request; wait's exit code.
func TestSessionsAndStatusForPeople(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	url := startServer(t)
	c.setenv("AGENTD_URL=" + url)
	if r := c.mustRun("sessions"); !strings.Contains(r.stdout, "no sessions yet") {
		t.Errorf("empty list: %s", r)
	}
	c.mustRun("run", "reply:first")
	if r := c.run("run", "fail:400"); r.code != 1 || !strings.Contains(r.stderr, "failed") {
		t.Errorf("failed run: %s", r)
	}
	r := c.mustRun("sessions")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "STATUS") || !strings.Contains(lines[0], "LAST RUN") {
		t.Fatalf("sessions table:\n%s", r.stdout)
	}
	if !strings.Contains(lines[1], "idle") || !strings.Contains(lines[1], "failed") || !strings.Contains(lines[2], "succeeded") {
		t.Errorf("rows (newest first):\n%s", r.stdout)
	}
	id := strings.Fields(lines[1])[0]
	r = c.mustRun("status", id)
	if !strings.HasPrefix(r.stdout, id+": idle\nlast run run_") || !strings.Contains(r.stdout, "failed") {
		t.Errorf("status: %s", r)
	}
	r = c.mustRun("status", "--json", id)
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st["type"] != "idle" {
		t.Errorf("status --json: %s (%v)", r.stdout, err)
	}
	if r := c.mustRun("status"); !strings.Contains(r.stdout, "no session is busy") {
		t.Errorf("status of all: %s", r)
	}
	if r := c.run("wait", id); r.code != 1 {
		t.Errorf("wait on a session whose last run failed: %s", r)
	}
}

// TestRunUsesTheConfiguration: run reads agentd.json, --config and the
// providers' keys exactly as serve does, so a real provider (here the
// fake one, over the OpenAI protocol) answers.
func TestRunUsesTheConfiguration(t *testing.T) {
	t.Parallel()
	fake := httptest.NewServer(fakellm.New(fakellm.Options{}).Handler())
	t.Cleanup(fake.Close)

	c := newCLI(t)
	conf := c.write("ci.json", fmt.Sprintf(`{"provider": {"fake": {"npm": "@ai-sdk/openai-compatible",
		"options": {"baseURL": %q, "apiKey": "{env:FAKE_KEY}"}}}, "model": "fake/fake-model"}`, fake.URL+"/v1"))
	if r := c.run("run", "--config", conf, "reply:from the config"); r.code != 1 || !strings.Contains(r.stderr, "FAKE_KEY is not set") {
		t.Errorf("unset variable: %s", r)
	}
	c.setenv("FAKE_KEY=k")
	if r := c.mustRun("run", "--config", conf, "reply:from the config"); r.stdout != "from the config\n" {
		t.Errorf("--config: %s", r)
	}
	// The same file as the directory's agentd.json, and a --model.
	c.write("agentd.json", fmt.Sprintf(`{"provider": {"fake": {"options": {"baseURL": %q}}}}`, fake.URL+"/v1"))
	if r := c.mustRun("run", "--model", "fake/fake-model", "reply:from agentd.json"); r.stdout != "from agentd.json\n" {
		t.Errorf("workspace config: %s", r)
	}
	// A key in the environment enables the stock provider.
	os.Remove(filepath.Join(c.dir, "agentd.json"))
	if r := c.run("run", "--model", "openai/fake-model", "reply:x"); r.code != 1 || !strings.Contains(r.stderr, "OPENAI_API_KEY") {
		t.Errorf("no key: %s", r)
	}
	c.setenv("OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+fake.URL+"/v1")
	if r := c.mustRun("run", "--model", "openai/fake-model", "reply:from the environment"); r.stdout != "from the environment\n" {
		t.Errorf("OPENAI_API_KEY: %s", r)
	}
	// Typos are refused with where they are.
	c.write("agentd.json", "{\n  \"modle\": \"fake/fake-model\"\n}")
	r := c.run("run", "reply:x")
	if r.code != 1 || !strings.Contains(r.stderr, `agentd.json:2:3: modle: unknown key "modle" (did you mean "model"?)`) {
		t.Errorf("typo: %s", r)
	}
	if r := c.run("config", "check"); r.code != 1 || !strings.Contains(r.stdout, `did you mean "model"`) {
		t.Errorf("config check: %s", r)
	}
}

// TestRunContinuesAndAttaches: the embedded server keeps the same
// database as serve, so --continue finds the directory's last session;
// --file sends a file's text to the model.
func TestRunContinuesAndAttaches(t *testing.T) {
	t.Parallel()
	fake := fakellm.New(fakellm.Options{Record: true})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	c := newCLI(t)
	c.write("agentd.json", fmt.Sprintf(`{"provider": {"fake": {"options": {"baseURL": %q}}}, "model": "fake/m"}`, srv.URL+"/v1"))
	c.write("notes.md", "the secret word is pelican")
	c.mustRun("run", "reply:one")
	c.mustRun("run", "--continue", "--file", "notes.md", "reply:two")
	rec := fake.Recorded()
	last := string(rec[len(rec)-1].Body)
	if !strings.Contains(last, "reply:one") || !strings.Contains(last, "pelican") {
		t.Errorf("the continued conversation did not hold the first turn and the file: %s", last)
	}
	if r := c.run("run", "--continue", "--session", "ses_x", "reply:x"); r.code != 2 {
		t.Errorf("--continue with --session: %s", r)
	}
}

// TestRunAttachesPictures: --file shot.png reaches the model as a picture
// (an image block over the wire, not text), a directory as its listing,
// and a model without image input refuses the picture before any call.
func TestRunAttachesPictures(t *testing.T) {
	t.Parallel()
	fake := fakellm.New(fakellm.Options{Record: true})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	c := newCLI(t)
	c.write("agentd.json", fmt.Sprintf(`{"provider": {"fake": {"npm": "@ai-sdk/anthropic", "options": {"baseURL": %q, "apiKey": "k"},
		"models": {"eyes": {"attachment": true}, "plain": {}}}}, "model": "fake/eyes"}`, srv.URL+"/v1"))
	img := image.NewGray(image.Rect(0, 0, 3, 3))
	var png bytes.Buffer
	if err := pngenc.Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	c.write("shot.png", png.String())
	if err := os.MkdirAll(filepath.Join(c.dir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.write("lib/util.go", "package lib\n")

	r := c.mustRun("run", "--file", "shot.png", "--file", "lib", "attachments:")
	if want := fmt.Sprintf("image image/png %d bytes", png.Len()); !strings.Contains(r.stdout, want) {
		t.Errorf("the model did not see the picture (want %q): %s", want, r)
	}
	// The run's call, not the title's (which may come after it).
	rec := fake.Recorded()
	var got []byte
	for _, r := range rec {
		if !bytes.Contains(r.Body, []byte("You write titles")) {
			got = r.Body
		}
	}
	if !bytes.Contains(got, []byte(`"type":"image"`)) || !bytes.Contains(got, []byte("util.go")) {
		t.Errorf("the provider got no image block or no listing: %.600s", got)
	}
	if r := c.run("run", "--model", "fake/plain", "--file", "shot.png", "reply:x"); r.code != 1 || !strings.Contains(r.stderr, "does not take image input") {
		t.Errorf("a picture for a text-only model: %s", r)
	}
	if len(fake.Recorded()) != len(rec) {
		t.Error("the provider was called for a refused prompt")
	}
}

// TestRunOutput: the answer alone on stdout; reasoning and retries on
// stderr; --format json as one event per line.
func TestRunOutput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.mustRun("run", "reasoning:weighing it\nfail:429x1\nreply:the answer")
	if r.stdout != "the answer\n" {
		t.Errorf("stdout holds more than the answer: %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "thinking: weighing it") || !strings.Contains(r.stderr, "↻ retry 1 in") {
		t.Errorf("stderr: %q", r.stderr)
	}
	r = c.mustRun("run", "--format", "json", "tool:list:{}\nreply:listed")
	var types []string
	text := ""
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Type      string `json:"type"`
			SessionID string `json:"sessionID"`
			Timestamp int64  `json:"timestamp"`
			Part      struct {
				Text string `json:"text"`
			} `json:"part"`
			Run struct {
				State string `json:"state"`
			} `json:"run"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.SessionID == "" || ev.Timestamp == 0 {
			t.Fatalf("line %q: %v", line, err)
		}
		types = append(types, ev.Type)
		if ev.Type == "text" {
			text += ev.Part.Text
		}
		if ev.Type == "run_finished" && ev.Run.State != "succeeded" {
			t.Errorf("run_finished: %s", line)
		}
	}
	want := "step_start tool_use step_finish step_start text step_finish run_finished"
	if got := strings.Join(types, " "); got != want || !strings.Contains(text, "listed") {
		t.Errorf("events %q (text %q), want %q", got, text, want)
	}
}

// TestRunPermissionWithoutTerminal: no terminal and no --yes is a clear
// failure (exit 3), never a silent hang; --yes allows.
func TestRunPermissionWithoutTerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	prompt := `tool:bash:{"command":"echo from-bash"}` + "\nreply:done"
	r := c.run("run", prompt)
	if r.code != 3 || !strings.Contains(r.stderr, "--yes") || !strings.Contains(r.stderr, "bash: echo from-bash") {
		t.Errorf("no terminal: %s", r)
	}
	r = c.mustRun("run", "--yes", prompt)
	if !strings.Contains(r.stdout, "from-bash") || !strings.Contains(r.stderr, "allowed bash: echo from-bash (--yes)") {
		t.Errorf("--yes: %s", r)
	}
}

// TestRunAsksOnTerminal answers permission asks as a person would, on a
// pseudo-terminal: once, always (then the next run does not ask), reject
// with a reason the model reads.
func TestRunAsksOnTerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	bash := func(cmd string) string { return fmt.Sprintf(`tool:bash:{"command":%q}`, cmd) + "\nreply:done" }

	term := c.terminal("run", bash("echo once-ok"))
	term.expect("[o]nce, [a]lways, [r]eject: ")
	term.send("o\n")
	out := term.wait(0)
	if !strings.Contains(out, "once-ok") {
		t.Errorf("once: %s", out)
	}

	term = c.terminal("run", bash("echo always-ok"))
	term.expect("always would allow, for this session: echo *")
	term.expect("[o]nce, [a]lways, [r]eject: ")
	term.send("a\n")
	term.wait(0)
	term = c.terminal("run", "--continue", bash("echo again"))
	if out := term.wait(0); strings.Contains(out, "[o]nce") || !strings.Contains(out, "again") {
		t.Errorf("always did not hold for the session:\n%s", out)
	}

	term = c.terminal("run", bash("rm -rf /tmp/nothing-here"))
	term.expect("[o]nce, [a]lways, [r]eject: ")
	term.send("maybe\n")
	term.expect("answer o, a or r")
	term.send("r\n")
	term.expect("tell the model why, and it goes on (empty: the turn ends here): ")
	term.send("not on my machine\n")
	if out := term.wait(0); !strings.Contains(out, "not on my machine") || !strings.Contains(out, "done") {
		t.Errorf("the model did not get the reason:\n%s", out)
	}

	// Rejected without a reason: the turn ends there (interrupted).
	term = c.terminal("run", bash("rm -rf /tmp/nothing-here-either"))
	term.expect("[o]nce, [a]lways, [r]eject: ")
	term.send("r\n")
	term.expect("(empty: the turn ends here): ")
	term.send("\n")
	if out := term.wait(130); strings.Contains(out, "done") || !strings.Contains(out, "interrupted (rejected)") {
		t.Errorf("a reject without a reason did not end the turn:\n%s", out)
	}
}

// terminal is agentd run with a pseudo-terminal for stdin and stderr (as
// a person at a terminal) and stdout on it too.
type terminal struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	seen   int
	done   chan struct{}
}

func (c *cli) terminal(args ...string) *terminal {
	c.t.Helper()
	master, slave := openPTY(c.t)
	cmd := c.command(context.Background(), args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	slave.Close()
	term := &terminal{t: c.t, master: master, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	c.t.Cleanup(func() {
		cmd.Process.Kill()
		master.Close()
	})
	return term
}

// expect waits until s appears after what was expected before.
func (term *terminal) expect(s string) {
	term.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		term.mu.Lock()
		text := term.out.String()
		term.mu.Unlock()
		if i := strings.Index(text[term.seen:], s); i >= 0 {
			term.seen += i + len(s)
			return
		}
		select {
		case <-term.done:
			term.t.Fatalf("agentd ended without printing %q:\n%s", s, text)
		case <-time.After(20 * time.Millisecond):
		}
	}
	term.t.Fatalf("no %q after a minute:\n%s", s, term.out.String())
}

func (term *terminal) send(s string) {
	if _, err := io.WriteString(term.master, s); err != nil {
		term.t.Fatal(err)
	}
}

// wait waits for the exit code and returns everything printed.
func (term *terminal) wait(code int) string {
	term.t.Helper()
	err := term.cmd.Wait()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	}
	<-term.done
	out := strings.ReplaceAll(term.out.String(), "\r\n", "\n")
	if got != code {
		term.t.Fatalf("exit %d, want %d:\n%s", got, code, out)
	}
	return out
}

// openPTY opens a pseudo-terminal pair (posix_openpt, unlockpt, ptsname).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
