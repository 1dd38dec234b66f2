package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestGoTestNamesWhatItSkipped runs go test on two packages that skip for
// want of PostgreSQL: go test's output holds exactly one line naming it
// and how to provide it.
func TestGoTestNamesWhatItSkipped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	cmd := exec.Command("go", "test", "-count=1", "../store/postgres/", "../store/postgres/pgtest/", "../store/storetest/")
	cmd.Env = append(os.Environ(), "AGENTD_TEST_POSTGRES=", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "agentd: tests skipped for want of"); n != 1 {
		t.Errorf("%d summary lines, want 1:\n%s", n, out)
	}
	if !strings.Contains(string(out), "PostgreSQL: set AGENTD_TEST_POSTGRES") {
		t.Errorf("the line does not say how to run the PostgreSQL tests:\n%s", out)
	}
}
