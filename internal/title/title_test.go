package title

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClean(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"  \"Fix the parser.\"\nmore": "Fix the parser",
		"# Title":                     "Title",
		"":                            "",
		strings.Repeat("é", 60):       strings.Repeat("é", 49) + "…",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStopBeforeStart: Stop is safe before Start and twice, and a writer
// stopped writes nothing more.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	w := New(nil, nil, nil, nil)
	w.Stop()
	w.Stop()
	w.Start(t.Context())
	// With no models a write would panic: none may start.
	w.Later("ses_x", core.ModelRef{ProviderID: "p", ModelID: "m"}, []string{"a prompt"})
	w.Wait()
}
