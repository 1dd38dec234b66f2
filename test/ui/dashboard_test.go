// Package ui_test drives agentd's dashboard (/ui) in a real headless
// Chromium against the real agentd binary: a prompt sent from the page
// streams and ends, abort and permission buttons act, and a page left open
// across kill -9 and a restart catches up by itself.
//
// Chromium comes from Debian's package (.ci/run installs it). Without it
// the tests skip, unless AGENTD_BROWSER_REQUIRED=1 makes that a failure.
// A failing test leaves a screenshot in test/ui/artifacts (or
// $AGENTD_ARTIFACTS). AGENTD_UI_SCREENSHOT=FILE makes TestDashboardPermission
// write the README's screenshot.
package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/internal/testbin"
	"github.com/agentd/agentd/internal/testenv"
)

// agentd is the real binary serving one database on a fixed port, so that
// a restart comes back at the same address the page uses.
type agentd struct {
	t    *testing.T
	args []string
	dir  string
	url  string
	log  *os.File
	cmd  *exec.Cmd
}

// startAgentd starts agentd with the given flags after its own.
func startAgentd(t *testing.T, flags ...string) *agentd {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	log, err := os.Create(filepath.Join(dir, "agentd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	a := &agentd{t: t, dir: dir, log: log, url: "http://127.0.0.1:" + strconv.Itoa(port),
		args: append([]string{"serve", "--port", strconv.Itoa(port), "--db", filepath.Join(dir, "agentd.db")}, flags...)}
	a.start()
	t.Cleanup(a.stop)
	return a
}

func (a *agentd) start() {
	a.t.Helper()
	cmd := exec.Command(testbin.Agentd(a.t), a.args...)
	cmd.Dir = a.dir
	cmd.Stderr = a.log
	if err := cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.cmd = cmd
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(a.url + "/global/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agentd did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *agentd) kill() {
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	_ = a.cmd.Wait()
}

func (a *agentd) stop() {
	if a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	_ = a.cmd.Wait()
}

// get reads a JSON route of the API.
func (a *agentd) get(path string, out any) {
	a.t.Helper()
	resp, err := http.Get(a.url + path)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
}

// post sends JSON to the API.
func (a *agentd) post(path, body string, out any) {
	a.t.Helper()
	resp, err := http.Post(a.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
}

// chromium finds the browser, or skips the test without one.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AGENTD_BROWSER_REQUIRED") == "1" {
		t.Fatal("no Chromium on PATH (apt-get install chromium)")
	}
	testenv.Skip(t, testenv.Browser, "no Chromium on PATH (AGENTD_BROWSER_REQUIRED=1 fails instead)")
	return ""
}

// page is one browser tab on the dashboard.
type page struct {
	t   *testing.T
	ctx context.Context
}

func openPage(t *testing.T, url string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	p := &page{t: t, ctx: ctx}
	t.Cleanup(func() {
		if t.Failed() {
			p.screenshot(artifact(t))
		}
	})
	// The browser lives as long as the context of the first call: that
	// call must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start browser: %v", err)
	}
	p.do(chromedp.Navigate(url))
	p.waitJS(`document.querySelector("[data-testid=conn]").dataset.state === "live"`, "the event stream to be live")
	return p
}

// artifact is where a failing test's screenshot goes.
func artifact(t *testing.T) string {
	dir := os.Getenv("AGENTD_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	_ = os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".png")
}

func (p *page) screenshot(path string) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// waitJS waits until the expression is true in the page.
func (p *page) waitJS(expr, what string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		p.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (p *page) eval(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// newSession creates a session from the sessions page and returns its id
// (the page then shows it).
func (p *page) newSession(title string) string {
	p.t.Helper()
	p.do(chromedp.Navigate(strings.Split(p.eval("location.href"), "#")[0]+"#/"),
		chromedp.WaitVisible(`[data-testid="new-session"]`),
		chromedp.SendKeys(`[data-testid="new-title"]`, title),
		chromedp.Click(`[data-testid="new-session"]`))
	p.waitJS(`location.hash.startsWith("#/session/") && !!document.querySelector("[data-testid=prompt]")`, "the session page")
	return strings.TrimPrefix(p.eval("location.hash"), "#/session/")
}

// prompt sends text from the session page's prompt box and waits until
// the page has it admitted (the box is cleared). The button is clicked on
// the element, not at a point of the screen: the transcript above it may
// grow between the two.
func (p *page) prompt(text string) {
	p.t.Helper()
	p.do(chromedp.SetValue(`[data-testid="prompt"]`, text))
	p.eval(`(() => { document.querySelector("[data-testid=send]").click(); return "" })()`)
	p.waitJS(`document.querySelector("[data-testid=prompt]")?.value === ""`, "the prompt to be admitted")
}

// outcome waits for the transcript to show n run ends and returns the
// outcome of the last.
func (p *page) outcome(n int) string {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`document.querySelectorAll("[data-testid=run-ended]").length >= %d`, n), "the run's end in the transcript")
	return p.eval(`[...document.querySelectorAll("[data-testid=run-ended] [data-testid=outcome]")].pop().dataset.outcome`)
}

func (p *page) status() string {
	return p.eval(`document.querySelector("h1 [data-testid=status]")?.dataset.status || ""`)
}

func TestDashboardPromptStreamsAndEnds(t *testing.T) {
	a := startAgentd(t)
	p := openPage(t, a.url+"/ui")
	sid := p.newSession("from the page")

	// Four chunks a second apart: the page shows the text growing while
	// the run is busy, before it ends.
	p.prompt("sleep:4\nreply:streamed to the end")
	p.waitJS(`[...document.querySelectorAll("[data-testid=text]")].some(e => e.textContent.includes("tick 2"))`, "streamed text")
	if st := p.status(); st != "busy" {
		t.Errorf("status while the text streams = %q, want busy", st)
	}
	if n := p.eval(`String(document.querySelectorAll("[data-testid=run-ended]").length)`); n != "0" {
		t.Errorf("run ended before its text finished streaming")
	}
	if o := p.outcome(1); o != "succeeded" {
		t.Fatalf("outcome = %q", o)
	}
	p.waitJS(`document.querySelector("[data-testid=transcript]")?.textContent.includes("streamed to the end")`, "the final answer")
	p.waitJS(`document.querySelector("h1 [data-testid=status]")?.dataset.status === "idle"`, "idle status")
	p.waitJS(`document.querySelector("[data-testid=run-row]")?.dataset.state === "succeeded"`, "the run in the runs table")

	// The sessions list shows it idle with its last outcome, and filters.
	p.do(chromedp.Click(`a[data-nav="sessions"]`))
	row := fmt.Sprintf(`document.querySelector('[data-testid=session-row][data-id=%q]')`, sid)
	p.waitJS(row+`?.querySelector("[data-testid=outcome]")?.dataset.outcome === "succeeded"`, "the last outcome in the list")
	if st := p.eval(row + `.querySelector("[data-testid=status]").dataset.status`); st != "idle" {
		t.Errorf("list status = %q, want idle", st)
	}
	// Live: a run started elsewhere turns the row busy, then idle again.
	var none struct{}
	a.post("/session/"+sid+"/prompt_async", `{"parts":[{"type":"text","text":"sleep:1"}]}`, &none)
	p.waitJS(row+`?.querySelector("[data-testid=status]").dataset.status === "busy"`, "the row to turn busy")
	p.waitJS(row+`?.querySelector("[data-testid=status]").dataset.status === "idle"`, "the row to turn idle")
	p.eval(`(() => { const s = document.querySelector("[data-testid=filter-status]"); s.value = "busy"; s.dispatchEvent(new Event("change")); return "" })()`)
	p.waitJS(row+` === null`, "the idle session filtered out")
}

func TestDashboardAbort(t *testing.T) {
	a := startAgentd(t)
	p := openPage(t, a.url+"/ui")
	p.newSession("abort me")
	p.prompt("sleep:600")
	p.waitJS(`document.querySelector("h1 [data-testid=status]")?.dataset.status === "busy" && !document.querySelector("[data-testid=abort]").disabled`, "a busy run")
	p.do(chromedp.Click(`[data-testid="abort"]`))
	if o := p.outcome(1); o != "interrupted" {
		t.Fatalf("outcome after abort = %q, want interrupted", o)
	}
	p.waitJS(`document.querySelector("h1 [data-testid=status]")?.dataset.status === "idle"`, "idle status")
	if r := p.eval(`document.querySelector("[data-testid=run-row]").dataset.state`); r != "interrupted" {
		t.Errorf("run row = %q", r)
	}
}

func TestDashboardPermission(t *testing.T) {
	a := startAgentd(t)
	p := openPage(t, a.url+"/ui")
	sid := p.newSession("permission")
	// bash asks by default.
	p.prompt(`tool:bash:{"command":"echo from-the-shell"}`)
	p.waitJS(`!!document.querySelector("[data-testid=permission]")`, "the permission request")
	if got := p.eval(`document.querySelector("[data-testid=permission]").textContent`); !strings.Contains(got, "bash") || !strings.Contains(got, "echo from-the-shell") {
		t.Errorf("permission card = %q", got)
	}
	// The header gains its waiting line once the status arrives: a click
	// aimed before that shift lands beside the button.
	p.waitJS(`document.querySelector("h1 [data-testid=status]")?.textContent.includes("waiting permission")`, "the waiting status")
	p.do(chromedp.Click(`[data-testid="perm-once"]`))
	if o := p.outcome(1); o != "succeeded" {
		t.Fatalf("outcome = %q", o)
	}
	p.waitJS(`document.querySelector("[data-testid=tool][data-tool=bash]")?.dataset.status === "completed"`, "the tool's result")
	if !strings.Contains(p.eval(`document.querySelector("[data-testid=tool][data-tool=bash]").textContent`), "from-the-shell") {
		t.Error("the tool's output is not shown")
	}
	p.waitJS(`!document.querySelector("[data-testid=permission]")`, "the answered request to go")

	// A rejected request ends the tool call with an error the page shows.
	p.prompt(`tool:bash:{"command":"echo never"}`)
	p.waitJS(`!!document.querySelector("[data-testid=permission]")`, "the second permission request")
	p.waitJS(`document.querySelector("h1 [data-testid=status]")?.textContent.includes("waiting permission")`, "the waiting status")
	if path := os.Getenv("AGENTD_UI_SCREENSHOT"); path != "" {
		// The README's picture: a finished run, a request waiting.
		p.screenshot(path)
	}
	p.do(chromedp.Click(`[data-testid="perm-reject"]`))
	p.outcome(2)
	p.waitJS(`[...document.querySelectorAll("[data-testid=tool][data-tool=bash]")].some(e => e.dataset.status === "error")`, "the rejected call")
	var perms []json.RawMessage
	a.get("/permission", &perms)
	if len(perms) != 0 {
		t.Errorf("pending after both answers: %s", perms)
	}
	var runs []struct{ State string }
	a.get("/session/"+sid+"/run", &runs)
	if len(runs) != 2 {
		t.Errorf("runs = %+v, want 2", runs)
	}
}

// TestDashboardSurvivesKill keeps the page open while agentd is killed
// with SIGKILL mid-run and started again: the page reconnects by itself,
// replays what it missed from its last seq (Last-Event-ID), and shows the
// resumed run's outcome, without a reload.
func TestDashboardSurvivesKill(t *testing.T) {
	a := startAgentd(t)
	p := openPage(t, a.url+"/ui")
	p.newSession("crash")
	p.eval(`window.__sameDocument = "yes"`)
	p.prompt("sleep:3\nreply:answered after the restart")
	p.waitJS(`[...document.querySelectorAll("[data-testid=text]")].some(e => e.textContent.includes("tick 1"))`, "the run to be streaming")

	a.kill()
	p.waitJS(`document.querySelector("[data-testid=conn]").dataset.state === "reconnecting"`, "the page to notice the drop")
	a.start()

	p.waitJS(`document.querySelector("[data-testid=conn]").dataset.state === "live"`, "the page to reconnect")
	if o := p.outcome(1); o != "succeeded" {
		t.Fatalf("outcome of the resumed run = %q", o)
	}
	p.waitJS(`document.querySelector("[data-testid=transcript]")?.textContent.includes("answered after the restart")`, "the resumed run's answer")
	p.waitJS(`document.querySelector("h1 [data-testid=status]")?.dataset.status === "idle"`, "idle status")
	if p.eval(`window.__sameDocument || ""`) != "yes" {
		t.Error("the page was reloaded")
	}
	p.waitJS(`Number(document.querySelector("[data-testid=notice]").dataset.missed) > 0`, "the report of what was missed")
	notice := p.eval(`document.querySelector("[data-testid=notice]").textContent`)
	if !strings.Contains(notice, "caught up on") {
		t.Errorf("notice = %q", notice)
	}
	// One run, resumed (not a second one), and its end shown once.
	var runs []struct {
		State   string
		Resumes int
	}
	a.get("/session/"+strings.TrimPrefix(p.eval("location.hash"), "#/session/")+"/run", &runs)
	if len(runs) != 1 || runs[0].State != "succeeded" {
		t.Errorf("runs = %+v, want one that succeeded", runs)
	}
	if n := p.eval(`String(document.querySelectorAll("[data-testid=run-ended]").length)`); n != "1" {
		t.Errorf("run ends shown = %s, want 1", n)
	}
}

// TestDashboardEvents follows the log live and resumes it from a seq.
func TestDashboardEvents(t *testing.T) {
	a := startAgentd(t)
	p := openPage(t, a.url+"/ui")
	p.newSession("events")
	p.prompt("reply:logged")
	p.outcome(1)
	p.do(chromedp.Click(`a[data-nav="events"]`))
	p.waitJS(`!!document.querySelector("[data-testid=resume]")`, "the events view")
	// Live: a session created through the API appears as it happens.
	var s struct{ ID string }
	a.post("/session", `{"title":"made elsewhere"}`, &s)
	p.waitJS(fmt.Sprintf(`[...document.querySelectorAll("[data-testid=event-row][data-type='session.created']")].some(r => r.textContent.includes(%q))`, s.ID), "the new session's event, live")
	// Resuming from seq 0 replays the whole log from its first event.
	p.do(chromedp.SetValue(`[data-testid="resume-seq"]`, "0"), chromedp.Click(`[data-testid="resume"]`))
	p.waitJS(`!!document.querySelector("[data-testid=event-row][data-seq='1']")`, "the replayed log from seq 1")
	p.waitJS(`!!document.querySelector("[data-testid=event-row][data-type='session.idle']")`, "the run's idle event")
	seqs := p.eval(`[...document.querySelectorAll("[data-testid=event-row]")].map(r => r.dataset.seq).join(",")`)
	parts := strings.Split(seqs, ",")
	for i := 1; i < len(parts); i++ {
		x, _ := strconv.Atoi(parts[i-1])
		y, _ := strconv.Atoi(parts[i])
		if x != y+1 {
			t.Fatalf("events not dense and newest first: %s", seqs)
		}
	}
}

// proxy stands between the browser and agentd so a test can cut the
// network: open connections are closed and new ones refused until it is
// restored, while agentd goes on.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: strings.TrimPrefix(target, "http://"), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection and refuses new ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// head reads the event log's head from agentd's stream header.
func (a *agentd) head() int {
	a.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.url+"/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := strconv.Atoi(resp.Header.Get("X-Agentd-Seq"))
	if err != nil {
		a.t.Fatalf("X-Agentd-Seq: %v", err)
	}
	return n
}

// TestDashboardNetworkDrop cuts the page's network while a run goes on
// and ends on the server. Restored, the page resumes from the last seq it
// had (Last-Event-ID) and receives exactly the events it missed — every
// one, each once — then shows the run's outcome, without a reload.
func TestDashboardNetworkDrop(t *testing.T) {
	a := startAgentd(t)
	px := startProxy(t, a.url)
	p := openPage(t, px.url()+"/ui")
	sid := p.newSession("network drop")
	p.eval(`window.__sameDocument = "yes"`)
	p.prompt("sleep:2\nreply:finished while you were away")
	p.waitJS(`[...document.querySelectorAll("[data-testid=text]")].some(e => e.textContent.includes("tick 1"))`, "the run to be streaming")

	px.cut()
	p.waitJS(`document.querySelector("[data-testid=conn]").dataset.state === "reconnecting"`, "the page to notice the drop")
	before, _ := strconv.Atoi(p.eval(`document.querySelector("[data-testid=conn]").dataset.seq`))
	var st struct{ Type string }
	for deadline := time.Now().Add(20 * time.Second); ; {
		a.get("/session/"+sid+"/status", &st)
		if st.Type == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Let the missed events age past the second a stream without a cursor
	// starts back from: only a resume from the page's own seq gets them.
	time.Sleep(1200 * time.Millisecond)
	head := a.head()
	px.restore()

	p.waitJS(`document.querySelector("[data-testid=conn]").dataset.state === "live"`, "the page to reconnect")
	if o := p.outcome(1); o != "succeeded" {
		t.Fatalf("outcome = %q", o)
	}
	p.waitJS(`Number(document.querySelector("[data-testid=notice]").dataset.missed) > 0`, "the report of what was missed")
	missed, _ := strconv.Atoi(p.eval(`document.querySelector("[data-testid=notice]").dataset.missed`))
	if missed != head-before {
		t.Errorf("page caught up on %d events, the log grew by %d (seq %d to %d) while it was away", missed, head-before, before, head)
	}
	notice := p.eval(`document.querySelector("[data-testid=notice]").textContent`)
	if want := fmt.Sprintf("since seq %d (seq %d–%d)", before, before+1, head); !strings.Contains(notice, want) {
		t.Errorf("notice = %q, want it to say %q", notice, want)
	}
	p.waitJS(`document.querySelector("[data-testid=transcript]")?.textContent.includes("finished while you were away")`, "the answer")
	if p.eval(`window.__sameDocument || ""`) != "yes" {
		t.Error("the page was reloaded")
	}
}
