package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardNeedsMe: the "Needs me" view gathers, across sessions, a
// permission ask and a question nobody answered, a run retrying (its error
// and next attempt) and a run that failed; the header counts them; an ask
// answered there leaves the list. The sessions list shows model, tokens,
// cost and time in state, finds a session by search and deletes one.
func TestDashboardNeedsMe(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agentd.json")
	if err := os.WriteFile(cfg, []byte(`{"agentd":{"questions":true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgentd(t, "--config", cfg)
	session := func(title, prompt string) string {
		var s struct{ ID string }
		a.post("/session", `{"title":"`+title+`"}`, &s)
		a.post("/session/"+s.ID+"/prompt_async", `{"parts":[{"type":"text","text":`+jsonString(prompt)+`}]}`, nil)
		return s.ID
	}
	asking := session("asking", `tool:bash:{"command":"echo needs-me"}`+"\nreply:done")
	session("questioning", `tool:question:{"questions":[{"question":"Which database?","header":"Database","options":[{"label":"SQLite","description":"embedded"}]}]}`)
	retrying := session("retrying", "fail:503x1000\nretryafter:300")
	failing := session("failing", "fail:400")

	p := openPage(t, a.url+"/ui#/attention")
	p.waitJS(`document.querySelector("[data-testid=attention-count]").dataset.count === "4"`, "four things needing a person")
	p.waitJS(`!!document.querySelector("[data-testid=attention-failed]") && !!document.querySelector("[data-testid=attention-retry]")`, "the failed and retrying runs")
	perm := p.eval(`document.querySelector("[data-testid=attention-permission]").textContent`)
	if !strings.Contains(perm, "asking") || !strings.Contains(perm, "bash") || !strings.Contains(perm, "echo needs-me") {
		t.Errorf("permission card = %q", perm)
	}
	if q := p.eval(`document.querySelector("[data-testid=attention-question]").textContent`); !strings.Contains(q, "Which database?") {
		t.Errorf("question card = %q", q)
	}
	retry := p.eval(`document.querySelector("[data-testid=attention-retry]").textContent`)
	if !strings.Contains(retry, "retrying") || !strings.Contains(retry, "503") || !strings.Contains(retry, "next try in") {
		t.Errorf("retry row = %q", retry)
	}
	if got := p.eval(`document.querySelector("[data-testid=attention-retry]").dataset.id`); got != retrying {
		t.Errorf("retry row is session %s, want %s", got, retrying)
	}
	failed := p.eval(`document.querySelector("[data-testid=attention-failed]").textContent`)
	if !strings.Contains(failed, "failing") || !strings.Contains(failed, "provider error") {
		t.Errorf("failed row = %q", failed)
	}

	// Answered from here, the ask goes and its run finishes.
	p.do(chromedp.Click(`[data-testid=attention-permission] [data-testid="perm-once"]`))
	p.waitJS(`!document.querySelector("[data-testid=attention-permission]")`, "the answered ask to leave the list")
	p.waitJS(`document.querySelector("[data-testid=attention-count]").dataset.count === "3"`, "the count to drop")
	var st struct{ Type string }
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a.get("/session/"+asking+"/status", &st)
		if st.Type == "idle" || time.Now().After(deadline) {
			break
		}
	}
	if st.Type != "idle" {
		t.Errorf("the answered session is %s", st.Type)
	}

	// The sessions list: columns, search, delete.
	p.do(chromedp.Navigate(a.url + "/ui#/"))
	p.waitJS(`document.querySelectorAll("[data-testid=session-row]").length === 4`, "the four sessions")
	row := func(id, cell string) string {
		return p.eval(`document.querySelector("[data-testid=session-row][data-id='` + id + `'] [data-testid=` + cell + `]")?.textContent || ""`)
	}
	p.waitJS(`!!document.querySelector("[data-testid=session-row][data-id='`+asking+`'] [data-testid=tokens]")?.textContent`, "the answered session's tokens")
	if m := row(asking, "model"); !strings.Contains(m, "/") {
		t.Errorf("model cell = %q", m)
	}
	if in := row(retrying, "in-state"); !strings.Contains(in, "next try in") {
		t.Errorf("retrying session's time in state = %q", in)
	}
	if in := row(asking, "in-state"); !strings.HasSuffix(in, "ago") {
		t.Errorf("idle session's time in state = %q", in)
	}
	p.do(chromedp.SendKeys(`[data-testid="search"]`, "failin"))
	p.waitJS(`document.querySelectorAll("[data-testid=session-row]").length === 1`, "the search to find one session")
	p.eval(`(() => { window.confirm = () => true; document.querySelector("[data-testid=session-row][data-id='` + failing + `'] [data-testid=delete-session]").click(); return "" })()`)
	p.waitJS(`document.querySelectorAll("[data-testid=session-row]").length === 0`, "the deleted session to go")
	resp, err := httpGet(a.url + "/session/" + failing)
	if err != nil || resp != 404 {
		t.Errorf("GET the deleted session: %d %v", resp, err)
	}
}

// TestDashboardHeadlessSnapshot: a browser that waits only for the page's
// load event, as a headless screenshot (chromium --headless --screenshot)
// does, sees the sessions, not "Loading…".
func TestDashboardHeadlessSnapshot(t *testing.T) {
	bin := chromium(t)
	a := startAgentd(t)
	var s struct{ ID string }
	a.post("/session", `{"title":"seen-by-a-snapshot"}`, &s)
	// Carried inside a <script> element, a title cannot end it.
	a.post("/session", `{"title":"</script><script>document.title='owned'</script>"}`, &s)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start browser: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()
	// Navigate returns at the load event; nothing is waited for after it.
	if err := chromedp.Do(tctx, chromedp.Navigate(a.url+"/ui")); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "seen-by-a-snapshot") || strings.Contains(text, "Loading") {
		t.Errorf("at the load event the page shows %q", text)
	}
	if !strings.Contains(text, "</script><script>document.title='owned'</script>") {
		t.Errorf("the title with markup is not shown as text: %q", text)
	}
	if title, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.title`)); title != "agentd" {
		t.Errorf("document.title = %q: the inline data ran as script", title)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// httpGet returns a GET's status code.
func httpGet(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
