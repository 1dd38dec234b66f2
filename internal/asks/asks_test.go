package asks

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/clock"
	"github.com/agentd/agentd/internal/core"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func fired(ch <-chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestExpiredCountsFromCreation: the timeout runs from the ask's creation
// (as stored), so an ask older than its timeout — one a restart cut off —
// expires at once; a rule without a timeout never expires, and a run that
// is not interactive expires every ask at once.
func TestExpiredCountsFromCreation(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000)
	clk := clock.NewFake(now)
	p := &Policy{Settings: Settings{Timeout: time.Minute}, Clock: clk,
		Agents: map[string]Settings{"plan": {}}}
	fresh := p.For("build", true).Expired(now.UnixMilli())
	old := p.For("build", true).Expired(now.Add(-2 * time.Minute).UnixMilli())
	if !fired(old) {
		t.Error("an overdue ask did not expire at once")
	}
	if p.For("plan", true).Expired(now.UnixMilli()) != nil {
		t.Error("an agent without a timeout has an expiry")
	}
	if !fired(p.For("plan", false).Expired(now.UnixMilli())) {
		t.Error("a non-interactive run's ask did not expire at once")
	}
	clk.Advance(time.Minute - time.Millisecond)
	if fired(fresh) {
		t.Fatal("expired before its timeout")
	}
	clk.Advance(time.Millisecond)
	if !fired(fresh) {
		t.Fatal("did not expire at its timeout")
	}
}

func TestDecisions(t *testing.T) {
	t.Parallel()
	p := &Policy{Settings: Settings{Timeout: time.Minute, OnTimeout: Interrupt,
		Allow: map[string][]string{"bash": {"go test *", "git status"}}}}
	r := p.For("build", true)
	for _, c := range []struct {
		perm     string
		patterns []string
		want     Decision
	}{
		{"bash", []string{"go test ./..."}, Decision{Reply: core.ReplyOnce, By: ByTimeout}},
		{"bash", []string{"go test", "git status"}, Decision{Reply: core.ReplyOnce, By: ByTimeout}},
		{"bash", []string{"go test ./...", "rm -rf x"}, Decision{Interrupt: true, Reply: core.ReplyReject, By: ByTimeout}},
		{"edit", []string{"go test x"}, Decision{Interrupt: true, Reply: core.ReplyReject, By: ByTimeout}},
		{"bash", nil, Decision{Interrupt: true, Reply: core.ReplyReject, By: ByTimeout}},
	} {
		if got := r.Permission(c.perm, c.patterns); got != c.want {
			t.Errorf("Permission(%s %q) = %+v, want %+v", c.perm, c.patterns, got, c.want)
		}
	}
	if got := (&Policy{}).For("", false).Question(); got != (Decision{Reply: core.ReplyReject, By: ByRules}) {
		t.Errorf("non-interactive question = %+v", got)
	}
}
