package engine

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
)

// TestPlace pins the busy policies: where a prompt goes given what runs.
func TestPlace(t *testing.T) {
	t.Parallel()
	one := []core.Run{{ID: "run_a"}}
	two := []core.Run{{ID: "run_a"}, {ID: "run_b"}}
	for _, c := range []struct {
		name   string
		in     PromptInput
		active []core.Run
		want   placement
		err    error
	}{
		{"idle: a run, started at once", PromptInput{}, nil, placement{state: core.RunRunning}, nil},
		{"idle, any policy", PromptInput{Policy: core.PolicyReject}, nil, placement{state: core.RunRunning}, nil},
		{"busy, default steers", PromptInput{}, one, placement{steer: "run_a"}, nil},
		{"busy, steer joins the oldest", PromptInput{Policy: core.PolicySteer}, two, placement{steer: "run_a"}, nil},
		{"busy, queue", PromptInput{Policy: core.PolicyQueue}, one, placement{state: core.RunQueued}, nil},
		{"busy, interrupt ends every active run", PromptInput{Policy: core.PolicyInterrupt}, two,
			placement{state: core.RunQueued, supersede: []string{"run_a", "run_b"}}, nil},
		{"busy, reject", PromptInput{Policy: core.PolicyReject}, one, placement{}, ErrBusy},
		{"a compaction queues rather than steers", PromptInput{Compact: true}, one, placement{state: core.RunQueued}, nil},
		{"no reply: no run", PromptInput{NoReply: true}, one, placement{}, nil},
		{"the user's shell needs an idle session", PromptInput{Shell: "ls"}, one, placement{}, ErrSessionBusy},
		{"the user's shell, idle", PromptInput{Shell: "ls"}, nil, placement{state: core.RunRunning}, nil},
	} {
		got, err := place(c.in, c.active)
		if !errors.Is(err, c.err) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
		}
		if d := cmp.Diff(c.want, got, cmp.AllowUnexported(placement{})); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}
