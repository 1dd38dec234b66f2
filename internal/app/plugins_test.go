package app_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/store/postgres/pgtest"
	"github.com/agentd/agentd/internal/testenv"
)

// pluginFolder is a plugin folder for a test: test/plugins' node_modules
// (Bun, @opencode-ai/plugin and SDK, the published plugins) linked in, and
// the named test plugins of internal/plugin/testdata copied beside them,
// so that their imports resolve as an installed plugin's do.
func pluginFolder(t testing.TB, files ...string) (dir string, specs []plugin.Spec) {
	t.Helper()
	if !testenv.Plugins.Have() {
		if os.Getenv("AGENTD_PLUGINS_REQUIRED") != "" {
			t.Fatal("AGENTD_PLUGINS_REQUIRED is set and test/plugins has no Bun: npm install in test/plugins")
		}
		testenv.Skip(t, testenv.Plugins, "plugins need Bun and @opencode-ai/plugin")
	}
	dir = t.TempDir()
	mods, err := filepath.Abs(testenv.PluginModules())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mods, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "plugin", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "local", f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, plugin.Spec{Spec: "./local/" + f, Path: p})
	}
	return dir, specs
}

// headerLog keeps the headers of the model calls the fake received.
type headerLog struct {
	mu  sync.Mutex
	got []http.Header
}

func (h *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.got = append(h.got, r.Header.Clone())
		h.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// fakeModelNode starts a node whose default model is the fake provider,
// recording requests, with opts applied last.
func fakeModelNode(t *testing.T, opts ...option) (*node, *fakellm.Server, *headerLog) {
	t.Helper()
	fake := fakellm.New(fakellm.Options{Second: 20 * time.Millisecond, Record: true})
	headers := &headerLog{}
	hs := httptest.NewServer(headers.wrap(fake.Handler()))
	t.Cleanup(hs.Close)
	f, err := config.Parse([]byte(`{"model": "fake/fake-model", "provider": {"fake": {"npm": "@ai-sdk/openai-compatible",
	  "options": {"baseURL": "` + hs.URL + `/v1", "apiKey": "k"}, "models": {"fake-model": {"limit": {"context": 100000, "output": 4096}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	models, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	all := append([]option{func(c *app.Config) {
		c.Models, c.Engine.DefaultModel = models, def
		c.Plugins.Config = map[string]any{"model": "fake/fake-model"}
	}}, opts...)
	return startNode(t, all...), fake, headers
}

// readLog reads the lines the test plugin wrote.
func readLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestPluginEveryHook: the test plugin's every hook has its effect, each
// where opencode calls it: chat.message's part is stored with the prompt,
// tool.definition, the system transform, chat.params and chat.headers
// reach the model, tool.execute.before's arguments are recorded with the
// call and after's output with its result, a plugin's tool is offered and
// called (its metadata, its context), shell.env's variable reaches bash,
// permission.ask turns an allowed command into a question, events arrive
// once each, the config hook sees the configuration, the plugin's client
// shows a toast and writes a log line through agentd's routes, a stuck hook fails
// its call after the timeout without holding the run, and dispose runs at
// the node's stop.
func TestPluginEveryHook(t *testing.T) {
	t.Parallel()
	dir, specs := pluginFolder(t, "everyhook.js")
	logPath := filepath.Join(t.TempDir(), "plugin.log")
	specs[0].Options = map[string]any{"log": logPath}
	n, fake, headers := fakeModelNode(t, func(c *app.Config) {
		c.Plugins.Specs, c.Plugins.Dir, c.Plugins.Timeout = specs, dir, 2*time.Second
	})
	ctx := t.Context()
	sid := n.session()

	m := n.send(sid, "[note]\n"+`tool:echo:{"text":"hi"}`+"\nreply:done")
	if !strings.HasPrefix(textOf(m), "done") {
		t.Fatalf("answer = %q", textOf(m))
	}
	msgs, err := n.c.Messages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if !hasText(msgs[0], "a note the plugin added") {
		t.Errorf("chat.message: the prompt's parts are %+v", msgs[0].Parts)
	}
	p := n.lastToolPart(sid)
	if p == nil || string(p.State.Input) != `{"text":"hi (before)"}` || p.State.Output != "hi (before) (after)" ||
		p.State.Title != "title from the plugin" || p.State.Metadata["plugin"] != true {
		t.Errorf("tool.execute.before/after: the call is %+v", p)
	}
	body := ""
	for _, r := range fake.Recorded() {
		if strings.Contains(string(r.Body), `"tools"`) && body == "" {
			body = string(r.Body) // the first step's (a title's is in parallel)
		}
	}
	for _, want := range []string{`"temperature":0.42`, `"reasoning_effort":"low"`, "SYSTEM LINE FROM THE PLUGIN", "[defined by the plugin]", `"plugin_add"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the model's request lacks %s: %s", want, body)
		}
	}
	headers.mu.Lock()
	var got []string
	for _, h := range headers.got {
		got = append(got, h.Get("X-Plugin-Header"))
	}
	headers.mu.Unlock()
	if !slices.Contains(got, "from-plugin "+sid) {
		t.Errorf("chat.headers: x-plugin-header = %q", got)
	}

	n.send(sid, `tool:plugin_add:{"a":1,"b":2}`+"\nreply:added")
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolCompleted || p.State.Output != "3" ||
		p.State.Title != "sum" || p.State.Metadata["session"] != sid || p.State.Metadata["agent"] != "build" {
		t.Errorf("the plugin's tool: %+v", p)
	}

	n.send(sid, `tool:bash:{"command":"echo var=$PLUGIN_SHELL_VAR","description":"env"}`+"\nreply:ok")
	if p := n.lastToolPart(sid); p == nil || !strings.Contains(p.State.Output, "var=set-by-plugin") {
		t.Errorf("shell.env: bash printed %+v", p)
	}

	start := time.Now()
	n.send(sid, `tool:count:{}`+"\nreply:after the stuck hook")
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "tool.execute.before") ||
		!strings.Contains(p.State.Error, "no answer within 2s") {
		t.Errorf("a stuck hook: the call is %+v", p)
	}
	if n.counts.Load() != 0 {
		t.Error("the tool ran though its before hook never answered")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the stuck hook held the run %s", d)
	}

	askedPermission(t, n, sid)

	n.stop()
	lines := readLog(t, logPath)
	seen := map[string]int{}
	var config, disposed, inits, toast, logged bool
	for _, l := range lines {
		toast = toast || l["toast"] == true
		logged = logged || l["logged"] == true
		if id, ok := l["id"].(string); ok && id != "" {
			seen[id]++
		}
		config = config || l["config"] == "fake/fake-model"
		disposed = disposed || l["disposed"] == true
		inits = inits || l["init"] != nil
	}
	if !config || !disposed || !inits {
		t.Errorf("config hook %v, dispose %v, init %v: %v", config, disposed, inits, lines)
	}
	if !toast || !logged {
		t.Errorf("the plugin's client: POST /tui/show-toast %v, POST /log %v: %v", toast, logged, lines)
	}
	if len(seen) < 10 {
		t.Errorf("the event hook saw %d events", len(seen))
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("event %s delivered %d times", id, k)
		}
	}
}

func hasText(m client.MessageWithParts, text string) bool {
	for _, p := range m.Parts {
		if p.Type == core.PartText && p.Text == text {
			return true
		}
	}
	return false
}

// askedPermission: permission.ask makes a command the rules allow ask.
func askedPermission(t *testing.T, n *node, sid string) {
	t.Helper()
	ctx := t.Context()
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: `tool:bash:{"command":"echo ask-me","description":"x"}` + "\nreply:asked"}); err != nil {
		t.Fatal(err)
	}
	var asks []client.PermissionRequest
	for deadline := time.Now().Add(10 * time.Second); len(asks) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		all, err := n.c.Permissions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range all {
			if a.SessionID == sid {
				asks = append(asks, a)
			}
		}
	}
	if len(asks) != 1 || asks[0].Permission != "bash" {
		t.Fatalf("permission.ask: pending asks %+v", asks)
	}
	if err := n.c.ReplyPermission(ctx, asks[0].ID, core.ReplyOnce, ""); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	if p := n.lastToolPart(sid); p == nil || !strings.Contains(p.State.Output, "ask-me") {
		t.Errorf("the asked command: %+v", p)
	}
}

// TestPluginHostCrash: a host that dies during a plugin tool's call ends
// that call failed (the run goes on, the model sees why), is started again
// with backoff, and its tools work again; a plugin tool's context.ask is a
// durable permission request like any call's.
func TestPluginHostCrash(t *testing.T) {
	t.Parallel()
	dir, specs := pluginFolder(t, "everyhook.js")
	specs[0].Options = map[string]any{"log": filepath.Join(t.TempDir(), "plugin.log")}
	n, _, _ := fakeModelNode(t, func(c *app.Config) {
		c.Plugins.Specs, c.Plugins.Dir = specs, dir
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "plugin_add", Pattern: "*", Action: core.ActionAsk})
	})
	sid := n.session()
	m := n.send(sid, `tool:plugin_crash:{}`+"\nreply:went on")
	if !strings.HasPrefix(textOf(m), "went on") {
		t.Errorf("the run after the crash answered %q", textOf(m))
	}
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "plugin host crashed") {
		t.Errorf("the crashed call: %+v", p)
	}
	var p *core.Part
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		n.send(sid, `tool:plugin_add:{"a":2,"b":3}`+"\nreply:ok")
		if p = n.lastToolPart(sid); p != nil && p.State.Output == "5" {
			break
		}
		time.Sleep(100 * time.Millisecond) // the supervisor's backoff: each try is a new run
	}
	if p == nil || p.State.Output != "5" {
		t.Fatalf("after the restart, the plugin's tool: %+v", p)
	}

	ctx := t.Context()
	if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: `tool:plugin_add:{"a":-1,"b":3}` + "\nreply:asked"}); err != nil {
		t.Fatal(err)
	}
	var asks []client.PermissionRequest
	for deadline := time.Now().Add(10 * time.Second); len(asks) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		asks, _ = n.c.Permissions(ctx)
	}
	if len(asks) != 1 || asks[0].Permission != "plugin_add" || asks[0].Patterns[0] != "-1" {
		t.Fatalf("context.ask: %+v", asks)
	}
	if err := n.c.ReplyPermission(ctx, asks[0].ID, core.ReplyOnce, ""); err != nil {
		t.Fatal(err)
	}
	n.waitIdle(sid)
	if p := n.lastToolPart(sid); p == nil || p.State.Output != "2" {
		t.Errorf("the asked plugin call: %+v", p)
	}
}

// TestPluginCommandHistoryCompaction: command.execute.before adds to a
// custom command's prompt (stored with it) or refuses the command with its
// reason, experimental.chat.messages.transform changes what the model sees
// of the history (not the record), and experimental.session.compacting's
// context reaches the model's request for the summary.
func TestPluginCommandHistoryCompaction(t *testing.T) {
	t.Parallel()
	dir, specs := pluginFolder(t, "everyhook.js")
	specs[0].Options = map[string]any{"log": filepath.Join(t.TempDir(), "plugin.log")}
	n, fake, _ := fakeModelNode(t, func(c *app.Config) {
		c.Plugins.Specs, c.Plugins.Dir = specs, dir
		c.Commands = command.Set{"plugcmd": {Name: "plugcmd", Template: "reply:from the template"},
			"failcmd": {Name: "failcmd", Template: "reply:never"}}
	})
	sid := n.session()
	run := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(n.app.URL()+"/session/"+sid+"/command", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := run(`{"command":"plugcmd","arguments":"xyz"}`); code != http.StatusOK {
		t.Fatalf("plugcmd: %d %s", code, body)
	}
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) == 0 || !hasText(msgs[0], "added by the command hook: xyz") {
		t.Errorf("command.execute.before: the prompt is %+v", msgs)
	}
	if code, body := run(`{"command":"failcmd","arguments":""}`); code != http.StatusInternalServerError ||
		!strings.Contains(body, "command refused by the plugin") {
		t.Errorf("a failing command.execute.before: %d %s", code, body)
	}
	n.send(sid, `tool:echo:{"text":"PRUNE-ME"}`+"\nreply:pruned")
	recorded := fake.Recorded()
	last := string(recorded[len(recorded)-1].Body)
	if !strings.Contains(last, "[pruned by the plugin]") || strings.Contains(last, "PRUNE-ME (before) (after)") {
		t.Errorf("experimental.chat.messages.transform: the step after the call sent %s", last)
	}
	if p := n.lastToolPart(sid); p == nil || p.State.Output != "PRUNE-ME (before) (after)" {
		t.Errorf("the record changed with what the model saw: %+v", p)
	}
	if err := n.c.Summarize(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range fake.Recorded() {
		found = found || strings.Contains(string(r.Body), "CONTEXT FROM THE COMPACTING HOOK "+sid)
	}
	if !found {
		t.Error("experimental.session.compacting: no request to the model holds the hook's context")
	}
}

// publishedNode is a node running one published plugin, installed from
// the npm registry into test/plugins (by .ci/run), unchanged.
func publishedNode(t *testing.T, pkg string) (*node, string) {
	t.Helper()
	dir, _ := pluginFolder(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		testenv.Skip(t, testenv.Plugins, pkg+" is not installed")
	}
	ws := t.TempDir()
	n, _, _ := fakeModelNode(t, func(c *app.Config) {
		c.Plugins.Specs, c.Plugins.Dir = []plugin.Spec{{Spec: pkg, Path: pkg}}, dir
		c.Directory = ws
	})
	return n, ws
}

// TestPublishedPlugins: three plugins from the npm registry, unchanged,
// each doing its job against the fake model: destructive-check turns a
// destructive command the rules allow into a question (permission.ask,
// which opencode never calls) and answers its status tool; prompt-recorder
// writes the session's prompts to files from the events it receives (a
// prompt without an answer: see there);
// opencode-pty runs a program in a pseudo-terminal through its tools and
// reads its output.
func TestPublishedPlugins(t *testing.T) {
	t.Parallel()
	t.Run("destructive-check", func(t *testing.T) {
		t.Parallel()
		n, _ := publishedNode(t, "@sureshsankaran/opencode-destructive-check")
		sid := n.session()
		n.send(sid, `tool:destructive-check-status:{}`+"\nreply:ok")
		if p := n.lastToolPart(sid); p == nil || !strings.Contains(p.State.Output, `"enabled": true`) {
			t.Fatalf("its status tool: %+v", p)
		}
		ctx := t.Context()
		if err := n.c.SendAsync(ctx, sid, client.Prompt{Text: `tool:bash:{"command":"git reset --hard","description":"reset"}` + "\nreply:after"}); err != nil {
			t.Fatal(err)
		}
		var asks []client.PermissionRequest
		for deadline := time.Now().Add(15 * time.Second); len(asks) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			asks, _ = n.c.Permissions(ctx)
		}
		if len(asks) != 1 || asks[0].Permission != "bash" {
			t.Fatalf("a destructive command the rules allow: asks %+v", asks)
		}
		if err := n.c.ReplyPermission(ctx, asks[0].ID, core.ReplyReject, "no"); err != nil {
			t.Fatal(err)
		}
		n.waitIdle(sid)
		if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "rejected") {
			t.Errorf("the rejected command: %+v", p)
		}
	})
	t.Run("prompt-recorder", func(t *testing.T) {
		t.Parallel()
		n, ws := publishedNode(t, "opencode-prompt-recorder")
		sid := n.session()
		// The prompt is not answered: the plugin's event hooks run side by
		// side (as opencode calls them), and an answer completed within a
		// second of the prompt (the fake model's, under load) has its file
		// written with the same name while the prompt's is being written,
		// one overwriting the other. A real model takes longer than that.
		resp, err := http.Post(n.app.URL()+"/session/"+sid+"/message", "application/json",
			strings.NewReader(`{"noReply":true,"parts":[{"type":"text","text":"please remember this prompt"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
			t.Fatalf("the prompt: %d %s", resp.StatusCode, b)
		}
		resp.Body.Close()
		found := ""
		for deadline := time.Now().Add(20 * time.Second); found == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			_ = filepath.WalkDir(filepath.Join(ws, ".prompts"), func(p string, d os.DirEntry, err error) error {
				if b, _ := os.ReadFile(p); err == nil && !d.IsDir() && strings.Contains(string(b), "please remember this prompt") &&
					strings.Contains(string(b), sid) {
					found = p
				}
				return nil
			})
		}
		if found == "" {
			t.Errorf("no prompt file under %s/.prompts names the session and holds the prompt", ws)
		}
	})
	t.Run("pty", func(t *testing.T) {
		t.Parallel()
		n, _ := publishedNode(t, "opencode-pty")
		sid := n.session()
		n.send(sid, `tool:pty_spawn:{"command":"bash","args":["-c","echo hello-from-pty; sleep 30"],"description":"print a line in a terminal"}`+"\nreply:ok")
		p := n.lastToolPart(sid)
		if p == nil || !strings.Contains(p.State.Output, "ID: pty_") {
			t.Fatalf("pty_spawn: %+v", p)
		}
		id := strings.Fields(p.State.Output[strings.Index(p.State.Output, "ID: ")+4:])[0]
		var out string
		for deadline := time.Now().Add(15 * time.Second); !strings.Contains(out, "hello-from-pty") && time.Now().Before(deadline); {
			n.send(sid, `tool:pty_read:{"id":"`+id+`"}`+"\nreply:ok")
			if p := n.lastToolPart(sid); p != nil {
				out = p.State.Output
			}
		}
		if !strings.Contains(out, "hello-from-pty") {
			t.Errorf("pty_read: %q", out)
		}
		n.send(sid, `tool:pty_kill:{"id":"`+id+`","cleanup":true}`+"\nreply:ok")
	})
}

// TestPluginsOnlyFromTheOperator: a project's agentd.json (which the model
// can write) neither lists plugins, nor adds its .opencode plugin files,
// nor sets agentd.plugins (its workspace switch, the environment the host
// gets) unless the operator's files allow the project's plugins; the
// operator's plugin folders and keys load.
func TestPluginsOnlyFromTheOperator(t *testing.T) {
	t.Setenv("OPERATOR_VAR", "op")
	t.Setenv("PROJECT_SECRET", "secret")
	ws, global := t.TempDir(), t.TempDir()
	write := func(p, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(global, "agentd.json"), `{"plugin": ["opencode-pty@0.1.3"], "agentd": {"plugins": {"timeout": "3s", "env": ["OPERATOR_VAR"]}}}`)
	write(filepath.Join(global, "plugin", "audit.js"), "export const A = async () => ({})")
	write(filepath.Join(ws, "agentd.json"), `{"plugin": ["./evil.js"], "agentd": {"plugins": {"workspace": true, "env": ["PROJECT_SECRET"]}}}`)
	write(filepath.Join(ws, ".opencode", "plugin", "evil2.js"), "export const E = async () => ({})")
	specs := func(pl app.Plugins) (out []string) {
		for _, s := range pl.Specs {
			out = append(out, filepath.Base(s.Path))
		}
		slices.Sort(out)
		return out
	}
	cfg, loaded, err := app.Configure(app.Setup{Workspace: ws, GlobalDir: global}, app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := specs(cfg.Plugins); !slices.Equal(got, []string{"audit.js", "opencode-pty"}) || cfg.Plugins.Workspace || cfg.Plugins.Timeout != 3*time.Second {
		t.Errorf("plugins %q, workspace %v, timeout %s", got, cfg.Plugins.Workspace, cfg.Plugins.Timeout)
	}
	env := strings.Join(cfg.Plugins.Env.Environ(), "\n")
	if !strings.Contains(env, "OPERATOR_VAR=op") || strings.Contains(env, "PROJECT_SECRET") {
		t.Errorf("the host's environment: %s", env)
	}
	var warned []string
	for _, w := range loaded.Warnings {
		warned = append(warned, w.Key)
	}
	if !slices.Contains(warned, "plugin") || !slices.Contains(warned, "agentd.plugins") {
		t.Errorf("warnings %q", warned)
	}

	allow := writeConfig(t, `{"agentd": {"plugins": {"workspace": true}}}`)
	cfg, _, err = app.Configure(app.Setup{Workspace: ws, GlobalDir: global, ConfigFile: allow}, app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := specs(cfg.Plugins); !slices.Equal(got, []string{"audit.js", "evil.js", "evil2.js", "opencode-pty"}) {
		t.Errorf("with the operator's workspace switch: plugins %q", got)
	}
}

// TestPluginEventsOnceAcrossNodes: on PostgreSQL every node's commit hook
// sees the whole log, and each event reaches the plugins of one node: the
// one that committed it. A run's events come from the node executing it;
// a session renamed through another node, with no run anywhere, reaches
// that node's plugins (it once reached none).
func TestPluginEventsOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	db := pgtest.Schema(t)
	dir, specs := pluginFolder(t, "everyhook.js")
	ws := t.TempDir()
	logs := []string{filepath.Join(t.TempDir(), "a.log"), filepath.Join(t.TempDir(), "b.log")}
	var nodes []*node
	for i, name := range []string{"plugin-a", "plugin-b"} {
		sp := slices.Clone(specs)
		sp[0].Options = map[string]any{"log": logs[i]}
		n, _, _ := fakeModelNode(t, func(c *app.Config) {
			c.DBPath, c.Node, c.Directory = db, name, ws
			c.Plugins.Specs, c.Plugins.Dir = sp, dir
		})
		nodes = append(nodes, n)
	}
	a, b := nodes[0], nodes[1]
	sa := a.session()
	a.send(sa, "reply:on a")
	sb := b.session()
	b.send(sb, "reply:on b") // b's plugins are set up for the directory
	if _, err := b.c.UpdateSession(t.Context(), sa, "renamed on b"); err != nil {
		t.Fatal(err)
	}
	renamed := func(lines []map[string]any) (k int) {
		for _, l := range lines {
			if l["title"] == "renamed on b" {
				k++
			}
		}
		return k
	}
	for deadline := time.Now().Add(10 * time.Second); renamed(readLog(t, logs[1])) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // the event hook is fire-and-forget: its file is the only sign
	}
	a.stop()
	b.stop()
	la, lb := readLog(t, logs[0]), readLog(t, logs[1])
	if renamed(la) != 0 || renamed(lb) != 1 {
		t.Errorf("the rename reached a's plugins %d times, b's %d (want 0, 1)", renamed(la), renamed(lb))
	}
	seen := map[string]int{}
	for _, l := range append(la, lb...) {
		if id, ok := l["id"].(string); ok && id != "" {
			seen[id]++
		}
	}
	if len(seen) < 10 {
		t.Errorf("the plugins saw %d events", len(seen))
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("event %s reached the plugins %d times", id, k)
		}
	}
}
