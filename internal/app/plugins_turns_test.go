package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
)

// turnNode is a node on the fake model running the test plugin file (one
// of internal/plugin/testdata), whose log is at the returned path.
func turnNode(t *testing.T, file, model string) (*node, *fakellm.Server, string) {
	t.Helper()
	dir, specs := pluginFolder(t, file)
	logPath := filepath.Join(t.TempDir(), "plugin.log")
	specs[0].Options = map[string]any{"log": logPath}
	n, fake := modelNode(t, providerKinds[0], model, "", func(c *app.Config) {
		c.Plugins.Specs, c.Plugins.Dir, c.Plugins.Timeout = specs, dir, 5*time.Second
		c.Plugins.Config = map[string]any{"model": "fake/fake-model"}
		if os.Getenv("DEBUGLOG") != "" {
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
		}
	})
	return n, fake, logPath
}

// waitLog waits until the plugin's log satisfies ok.
func waitLog(t *testing.T, path string, ok func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lines := readLog(t, path)
		if ok(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's log never got there: %v", lines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func post(t *testing.T, n *node, path, body string) (int, string) {
	t.Helper()
	resp, err := n.c.HTTPClient().Post(n.app.URL()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPluginTextCompleteAndLiveEvents: experimental.text.complete is
// called once for the answer's text part as it ends, and what it returns
// is the part's text for clients (the transcript, the durable
// message.part.updated) and for the model's later history; the event hook
// gets every streamed delta once (they add up to the text as streamed),
// the toasts and the TUI requests; the small model the plugin picks
// writes the session's title.
func TestPluginTextCompleteAndLiveEvents(t *testing.T) {
	t.Parallel()
	n, fake, logPath := turnNode(t, "turnhooks.js", "")
	sid := n.session()
	words := make([]string, 200)
	for i := range words {
		words[i] = "w" + itoa(int64(i))
	}
	words[100] = "complete-me"
	streamed := strings.Join(words, " ")
	m := n.send(sid, "reply:"+streamed)
	want := strings.Replace(streamed, "complete-me", "COMPLETED BY THE PLUGIN", 1)
	if got := textOf(m); got != want {
		t.Fatalf("the answer is %q, want the plugin's text", got)
	}
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	text := partOf(msgs[len(msgs)-1], core.PartText)
	if text == nil || text.Text != want || text.Time.End == 0 {
		t.Fatalf("the stored part is %+v", text)
	}
	durable := false
	for _, ev := range n.allEvents() {
		durable = durable || (ev.Type == core.EventPartUpdated && strings.Contains(string(ev.Properties), "COMPLETED BY THE PLUGIN"))
	}
	if !durable {
		t.Error("no message.part.updated carries the plugin's text")
	}
	n.send(sid, "reply:next")
	if body := string(lastRequest(t, fake).Body); !strings.Contains(body, `"assistant","content":"`+want) {
		t.Errorf("the next step's history does not hold the plugin's text: %s", body)
	}

	for _, p := range []struct{ path, body string }{{"/tui/show-toast", `{"message":"toast for the plugin","variant":"info"}`},
		{"/tui/append-prompt", `{"text":"appended for the plugin"}`}} {
		if code, body := post(t, n, p.path, p.body); code != http.StatusOK {
			t.Fatalf("%s: %d %s", p.path, code, body)
		}
	}
	lines := waitLog(t, logPath, func(lines []map[string]any) bool {
		var toast, appended bool
		for _, l := range lines {
			toast = toast || l["message"] == "toast for the plugin"
			appended = appended || l["text"] == "appended for the plugin"
		}
		return toast && appended
	})
	var deltas strings.Builder
	ids := map[string]int{}
	completes := map[string]int{}
	for _, l := range lines {
		if l["part"] == text.ID {
			deltas.WriteString(l["delta"].(string))
		}
		if id, ok := l["id"].(string); ok {
			ids[id]++
		}
		if p, ok := l["complete"].(string); ok {
			completes[p]++
			if p == text.ID && l["text"] != streamed {
				t.Errorf("text.complete got %q, want the text as streamed", l["text"])
			}
		}
	}
	if deltas.String() != streamed {
		t.Errorf("the event hook's deltas add up to %q, want %q", deltas.String(), streamed)
	}
	for id, k := range ids {
		if k != 1 {
			t.Errorf("event %s delivered %d times", id, k)
		}
	}
	if completes[text.ID] != 1 || len(completes) != 2 {
		t.Errorf("text.complete calls by part: %v (want one for each of the 2 answers)", completes)
	}

	var title *fakellm.Recorded
	for _, r := range fake.Recorded() {
		if r.Request.Purpose == "title" {
			title = &r
		}
	}
	if title == nil || !strings.Contains(string(title.Body), `"model":"small"`) {
		t.Errorf("the title was not asked of the plugin's small model: %s", title.Body)
	}
}

// TestPluginTextCompleteNotAgainOnResume: a text part that ended before
// its step's tool call (experimental.text.complete's text stored with it)
// is not completed again when the run, stopped while the call runs,
// resumes on the next node: the hook is called once for it, and the
// stored text stays the plugin's.
func TestPluginTextCompleteNotAgainOnResume(t *testing.T) {
	t.Parallel()
	n, _, logPath := turnNode(t, "turnhooks.js", "")
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "say:complete-me first\ntool:block:{}\nreply:after"}); err != nil {
		t.Fatal(err)
	}
	n.waitToolRunning(sid)
	n2 := n.restart()
	if st := n2.waitIdle(sid); st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("the resumed run ended %+v", st.Last)
	}
	var first *core.Part
	for _, m := range mustMessages(t, n2, sid) {
		for i, p := range m.Parts {
			if m.Info.Role == core.RoleAssistant && p.Type == core.PartText && strings.Contains(p.Text, "first") && first == nil {
				first = &m.Parts[i]
			}
		}
	}
	if first == nil || first.Text != "COMPLETED BY THE PLUGIN first" {
		t.Fatalf("the step's text part is %+v", first)
	}
	calls := 0
	for _, l := range readLog(t, logPath) {
		if l["complete"] == first.ID {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("experimental.text.complete was called %d times for the recorded part, want 1", calls)
	}
}

// TestPluginTitleInSessionDirectory: a session's title is asked through
// the plugins of the session's directory, as its runs are (opencode's
// instance is the session's): the small model the plugin picks and
// chat.params for the title's call (agent "title") come from the
// instance made for that directory, not the server's.
func TestPluginTitleInSessionDirectory(t *testing.T) {
	t.Parallel()
	n, fake, logPath := turnNode(t, "turnhooks.js", "")
	sess, err := n.c.CreateSession(t.Context(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n.send(sess.ID, "reply:hello")
	lines := waitLog(t, logPath, func(lines []map[string]any) bool {
		return slices.ContainsFunc(lines, func(l map[string]any) bool { return l["params"] == "title" })
	})
	small := false
	for _, l := range lines {
		if l["small"] != nil || l["params"] == "title" {
			small = small || l["small"] != nil
			if l["dir"] != sess.Directory {
				t.Errorf("the title's hook %v was asked of the instance of %v, not of the session's directory %s", l, l["dir"], sess.Directory)
			}
		}
	}
	if !small {
		t.Errorf("experimental.provider.small_model was not asked: %v", lines)
	}
	var title *fakellm.Recorded
	for _, r := range fake.Recorded() {
		if r.Request.Purpose == "title" {
			title = &r
		}
	}
	if title == nil || !strings.Contains(string(title.Body), `"model":"small"`) {
		t.Errorf("the title was not asked of the plugin's small model: %+v", title)
	}
}

// TestPluginCompactionAutocontinue: after an automatic compaction the
// run of a session whose plugin answers enabled: false ends with the
// summary, as opencode's loop does without its continue turn; another
// session's run goes on and answers; the hook is told of each.
func TestPluginCompactionAutocontinue(t *testing.T) {
	t.Parallel()
	n, _, logPath := turnNode(t, "turnhooks.js", smallModel)
	long := strings.Repeat("word ", 600)
	stop, goOn := n.session(), n.session()
	for _, sid := range []string{stop, goOn} {
		marker := ""
		if sid == stop {
			marker = "[no-continue]\n"
		}
		for _, p := range []string{"FIRST ", "SECOND ", "THIRD "} {
			n.send(sid, marker+"reply:"+p+long)
		}
	}
	ended, answered := false, false
	for _, sid := range []string{stop, goOn} {
		msgs := mustMessages(t, n, sid)
		for i, m := range msgs {
			if !m.Info.Summary {
				continue
			}
			last := i == len(msgs)-1 || msgs[i+1].Info.Role == core.RoleUser
			if sid == stop {
				ended = ended || last
			} else if last {
				t.Errorf("the run without the plugin's veto stopped at its compaction")
			} else {
				answered = true
			}
		}
	}
	if !ended || !answered {
		t.Errorf("a run ended at its compaction: %v; a run went on after it: %v", ended, answered)
	}
	var told []string
	for _, l := range readLog(t, logPath) {
		if s, ok := l["autocontinue"].(string); ok {
			told = append(told, s)
			if l["overflow"] != false || l["agent"] != "build" || l["model"] != "fake-model" {
				t.Errorf("autocontinue's input: %v", l)
			}
		}
	}
	if !slices.Contains(told, stop) || !slices.Contains(told, goOn) {
		t.Errorf("autocontinue was told of %v", told)
	}
}

// TestPluginConfigReadBack: what the plugin's config hook adds takes
// effect (its command and agent are listed, run and answer; the agent's
// prompt reaches the model), the agent's permission is only tightened and
// its tools only switched off, and the keys only the operator sets stay
// as they were.
func TestPluginConfigReadBack(t *testing.T) {
	t.Parallel()
	n, fake, _ := turnNode(t, "turnhooks.js", "")
	var cmds []map[string]any
	if err := getJSON(n, "/command", &cmds); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(cmds, func(c map[string]any) bool { return c["name"] == "plugin-cmd" }) {
		t.Errorf("GET /command lacks the plugin's command: %v", cmds)
	}
	var agents []struct {
		Name       string
		Permission []core.Rule
	}
	if err := getJSON(n, "/agent", &agents); err != nil {
		t.Fatal(err)
	}
	rules := map[string][]core.Rule{}
	for _, a := range agents {
		rules[a.Name] = a.Permission
	}
	pa, ok := rules["plugin-agent"]
	if !ok {
		t.Fatalf("GET /agent lacks the plugin's agent: %v", agents)
	}
	if !slices.Contains(pa, core.Rule{Permission: "edit", Pattern: "*", Action: core.ActionDeny}) ||
		len(pa) != len(rules["build"])+1 {
		t.Errorf("the plugin's agent's rules: %v (build's: %v): want build's and the deny", pa, rules["build"])
	}
	var cfg map[string]any
	if err := getJSON(n, "/config", &cfg); err != nil {
		t.Fatal(err)
	}
	if c, _ := cfg["command"].(map[string]any); c["plugin-cmd"] == nil {
		t.Errorf("GET /config lacks the plugin's command: %v", cfg)
	}
	if cfg["agentd"] != nil || strings.Contains(toJSON(cfg["permission"]), `"*":"allow"`) {
		t.Errorf("GET /config shows an operator's key the plugin changed: %v", cfg)
	}

	sid := n.session()
	if _, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:as the plugin's agent", Agent: "plugin-agent"}); err != nil {
		t.Fatal(err)
	}
	req := lastRequest(t, fake)
	if !strings.Contains(strings.Join(req.Request.System, "\n"), "PROMPT OF THE PLUGIN'S AGENT") {
		t.Errorf("the plugin's agent's prompt did not reach the model: %v", req.Request.System)
	}
	var tools []string
	for _, tl := range req.Request.Tools {
		tools = append(tools, tl.Name)
	}
	if slices.Contains(tools, "echo") || !slices.Contains(tools, "bash") {
		t.Errorf("the plugin's agent's tools: %v (echo switched off, bash as the operator's)", tools)
	}
	if code, body := post(t, n, "/session/"+sid+"/command", `{"command":"plugin-cmd","arguments":"xyz"}`); code != http.StatusOK ||
		!strings.Contains(body, "from the plugin's command xyz") {
		t.Errorf("the plugin's command: %d %s", code, body)
	}
}

// TestPluginSlowEventHook: a plugin slower than the stream does not hold
// it: the answer completes while the plugin has seen a fraction of its
// deltas, and the events it could not take are dropped and counted.
func TestPluginSlowEventHook(t *testing.T) {
	t.Parallel()
	n, _, logPath := turnNode(t, "slowevents.js", "")
	sid := n.session()
	m := n.send(sid, "reply:"+strings.Repeat("word ", 8000))
	if !strings.HasPrefix(textOf(m), "word word") {
		t.Fatalf("answer = %.40q", textOf(m))
	}
	seen := len(readLog(t, logPath))
	if seen >= 8000 {
		t.Errorf("the plugin saw all %d deltas before the answer was done: the stream waited for it", seen)
	}
	if d := n.app.PluginHost().EventsDropped(); d == 0 {
		t.Error("no event was dropped for the slow plugin")
	}
	waitLog(t, logPath, func(lines []map[string]any) bool { return len(lines) > 0 })
}
