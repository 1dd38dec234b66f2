package opencode_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// TestDocLints: agentd's own document (/doc) passes Redocly's recommended
// rules with no error and no warning but the missing license (the project
// has chosen none yet).
func TestDocLints(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	cli := filepath.Join(filepath.Dir(file), "..", "compat", "node_modules", "@redocly", "cli", "bin", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		if os.Getenv("AGENTD_OPENCODE_REQUIRED") != "" {
			t.Fatalf("no Redocly CLI (npm install in test/compat): %v", err)
		}
		t.Skip("no Redocly CLI: npm install in test/compat")
	}
	n := startNode(t, "")
	resp, err := http.Get(n.app.URL() + "/doc")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	path := filepath.Join(t.TempDir(), "agentd.json")
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", cli, "lint", path, "--format=json", "--max-problems=10000")
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "CI=true")
	out, _ := cmd.Output() // exits 1 on any error; the problems say which
	var report struct {
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("redocly's report: %v\n%.2000s", err, out)
	}
	for _, p := range report.Problems {
		if p.RuleID == "info-license" {
			continue
		}
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
}
