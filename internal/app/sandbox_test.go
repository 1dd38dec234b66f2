package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/testenv"
)

// escapes are what a command the rules allowed tries; each prints its
// marker only if it worked. Its paths come from a file the parser never
// reads (vars), as a parse that missed something would let through.
const escapes = `. ./vars; mkdir run$$ && cd run$$
echo x > "$OUT/abs" && echo ESCAPED-ABS
(cd "$OUT" && echo x > cd && echo ESCAPED-CD)
ln -s "$OUT" link && echo x > link/sym && echo ESCAPED-SYMLINK
head -c 64 "$DB" | grep -q SQLite && echo READ-DB
echo x >> "$DB" && echo WROTE-DB
grep -q CONFIGSECRET "$CFG" && echo READ-CONFIG
head -c 64 "$PROC/$SERVER/environ" >/dev/null && echo READ-ENVIRON
kill -0 $SERVER && echo SIGNALLED
kill -URG $SERVER && echo SIGNALLED
echo ok > inside.txt && cat inside.txt
echo TMP-OK > "$TMPDIR/t" && cat "$TMPDIR/t"
git init -q && git add inside.txt && git -c user.name=a -c user.email=a@b commit -qm m && echo "GIT-$(git log --oneline | wc -l)"
ls "$USR/bin" | grep -qx env && echo READ-USR
true`

// TestSandboxHoldsWhatTheRulesAllow: a bash command the rules allow, run
// by the model or as the user's shell command, still cannot write outside
// its workspace (absolute path, cd, symlink), read or change the server's
// database, read its configuration or its environment, or signal it; and
// it does its normal work.
func TestSandboxHoldsWhatTheRulesAllow(t *testing.T) {
	if sandbox.ABI() < 6 {
		testenv.Skip(t, testenv.Landlock(6), "the sandbox's signal scope needs Landlock ABI 6")
	}
	t.Parallel()
	outside, cfgDir := t.TempDir(), t.TempDir()
	cfgFile := filepath.Join(cfgDir, "agentd.json")
	if err := os.WriteFile(cfgFile, []byte(`{"CONFIGSECRET": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(c *app.Config) { c.ConfigFiles = []string{cfgFile} })
	vars := map[string]string{"OUT": outside, "DB": n.cfg.DBPath, "CFG": cfgFile, "SERVER": strconv.Itoa(os.Getpid()),
		"PROC": "/proc", "USR": "/usr"}
	var b strings.Builder
	for k, v := range vars {
		b.WriteString(k + "=" + strconv.Quote(v) + "\n")
	}
	if err := os.WriteFile(filepath.Join(n.cfg.Directory, "vars"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	script := escapes
	input, _ := json.Marshal(map[string]string{"command": script})
	sid := n.session()
	n.send(sid, "tool:bash:"+string(input))
	p := n.lastToolPart(sid)
	if p == nil || p.State.Status != core.ToolCompleted {
		t.Fatalf("bash call: %+v", p)
	}
	check := func(who, out string) {
		t.Helper()
		for _, bad := range []string{"ESCAPED", "READ-DB", "WROTE-DB", "READ-CONFIG", "READ-ENVIRON", "SIGNALLED"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: %s: %s", who, bad, out)
			}
		}
		for _, good := range []string{"ok\n", "TMP-OK\n", "GIT-1\n", "READ-USR\n"} {
			if !strings.Contains(out, good) {
				t.Errorf("%s: normal work failed (no %q): %s", who, good, out)
			}
		}
	}
	check("the model's bash", p.State.Output)
	for _, f := range []string{"abs", "cd", "sym"} {
		if _, err := os.Stat(filepath.Join(outside, f)); err == nil {
			t.Errorf("%s was written outside the workspace", f)
		}
	}

	// The user's shell command runs confined too.
	sid = n.session()
	m, err := n.c.Shell(t.Context(), sid, "", script)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, p := range m.Parts {
		if p.Type == core.PartTool {
			out = p.State.Output
		}
	}
	check("the user's shell", out)

	// The node says what confines its commands.
	res, err := http.Get(n.app.URL() + "/node")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), `"sandbox":"landlock ABI `) {
		t.Errorf("/node = %s", body)
	}
}

// TestSandboxOnlyFromTheOperator: the project's agentd.json (which the
// model can write) cannot loosen the sandbox; the operator's files set it.
func TestSandboxOnlyFromTheOperator(t *testing.T) {
	t.Parallel()
	ws, global := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "agentd.json"), []byte(`{"agentd":{"sandbox":{"mode":"off","writable":["/"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(global, "agentd.json"), []byte(`{"agentd":{"sandbox":{"network":false,"hidden":["~/.ssh"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, loaded, err := app.Configure(app.Setup{Workspace: ws, GlobalDir: global}, app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := cfg.Sandbox; sc.Mode != "" || len(sc.Writable) != 0 || !sc.DenyNetwork || len(sc.Hidden) != 1 {
		t.Errorf("sandbox = %+v", sc)
	}
	warned := false
	for _, w := range loaded.Warnings {
		warned = warned || w.Key == "agentd.sandbox" && w.File == filepath.Join(ws, "agentd.json")
	}
	if !warned {
		t.Errorf("the project's sandbox block was ignored silently: %+v", loaded.Warnings)
	}
	if len(cfg.ConfigFiles) != 2 {
		t.Errorf("config files = %q", cfg.ConfigFiles)
	}
	if _, _, err := app.Configure(app.Setup{Workspace: t.TempDir(), ConfigFile: writeConfig(t, `{"agentd":{"sandbox":{"hidden":["relative"]}}}`)}, app.Config{}); err == nil {
		t.Error("a relative hidden path was accepted")
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agentd.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSandboxSaidAtStart: the start-up log says what confines commands,
// and says it loudly when nothing does.
func TestSandboxSaidAtStart(t *testing.T) {
	t.Parallel()
	want := "sandbox: landlock ABI "
	if sandbox.ABI() == 0 {
		want = "sandbox: UNAVAILABLE, commands run for the model are NOT confined"
	}
	for _, c := range []struct {
		mode sandbox.Mode
		log  string
	}{{"", want}, {sandbox.ModeOff, "sandbox: off (agentd.sandbox.mode)"}} {
		var logs syncBuffer
		n := startNode(t, func(cfg *app.Config) {
			cfg.Sandbox.Mode = c.mode
			cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		})
		n.stop()
		said := false
		for _, l := range logs.lines() {
			msg, _ := l["msg"].(string)
			said = said || strings.HasPrefix(msg, c.log)
		}
		if !said {
			t.Errorf("mode %q: no log line starts with %q", c.mode, c.log)
		}
	}
}
