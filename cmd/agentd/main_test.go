package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunExitCodes drives `agentd run` with its embedded server: the exit
// code says how the run ended.
func TestRunExitCodes(t *testing.T) {
	db := filepath.Join(t.TempDir(), "agentd.db")
	t.Setenv("AGENTD_URL", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, c := range []struct {
		prompt string
		want   int
	}{
		{"reply:hello from the CLI", 0},
		{"tool:list:{}\nreply:listed", 0},
		{"fail:400", 1},
	} {
		if got := run([]string{"run", "--db", db, c.prompt}); got != c.want {
			t.Errorf("agentd run %q = %d, want %d", c.prompt, got, c.want)
		}
	}
	if got := run([]string{"run"}); got != 2 {
		t.Errorf("agentd run without a prompt = %d, want 2", got)
	}
	if got := run([]string{"nope"}); got != 2 {
		t.Errorf("unknown command = %d, want 2", got)
	}
	if got := run([]string{"version"}); got != 0 {
		t.Errorf("version = %d", got)
	}
}

func TestServeRefusesOpenListenerWithoutPassword(t *testing.T) {
	t.Setenv("AGENTD_SERVER_PASSWORD", "")
	t.Setenv("OPENCODE_SERVER_PASSWORD", "")
	if _, err := securityFromEnv("0.0.0.0"); err == nil {
		t.Error("non-loopback listener without a password accepted")
	}
	t.Setenv("AGENTD_SERVER_PASSWORD", "pw")
	sec, err := securityFromEnv("0.0.0.0")
	if err != nil || sec.Password != "pw" || sec.LoopbackOnly {
		t.Errorf("with a password: %+v %v", sec, err)
	}
	sec, _ = securityFromEnv("127.0.0.1")
	if !sec.LoopbackOnly {
		t.Error("loopback listener without host checks")
	}
}

func TestLogFormats(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped below the level")
	log.Warn("kept", "run", "run_1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "kept" || line["run"] != "run_1" {
		t.Errorf("json log = %q (%v)", buf.String(), err)
	}
	buf.Reset()
	log, _ = newLogger(&buf, "text", "info")
	log.Info("hello", "k", "v")
	if !strings.Contains(buf.String(), `msg=hello k=v`) {
		t.Errorf("text log = %q", buf.String())
	}
	if _, err := newLogger(&buf, "xml", "info"); err == nil {
		t.Error("log format xml accepted")
	}
	if _, err := newLogger(&buf, "json", "loud"); err == nil {
		t.Error("log level loud accepted")
	}
}

// TestResumeFlag: --resume alone and =true resume, =false ends cut-off
// runs, =paused holds them; another value is refused.
func TestResumeFlag(t *testing.T) {
	for args, want := range map[string]string{"--resume": "true", "--resume=false": "false", "--resume=paused": "paused", "": "true"} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		r := resumeFlag("true")
		fs.Var(&r, "resume", "")
		if err := fs.Parse(strings.Fields(args)); err != nil || string(r) != want {
			t.Errorf("%q: %q %v, want %q", args, r, err, want)
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	r := resumeFlag("true")
	fs.Var(&r, "resume", "")
	if err := fs.Parse([]string{"--resume=later"}); err == nil {
		t.Error("--resume=later was accepted")
	}
}
