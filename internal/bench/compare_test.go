package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	refs := &References{CommitCeilingPerS: 5000, GoServerStartMs: 3, GoProgramMs: 1, CPULoopMs: 40}
	base := Report{Results: []Result{
		{Scenario: "turn", Figures: map[string]float64{"turns": 300}, Latency: map[string]Latency{"post_to_idle": {P50: 10, P99: 20}}},
		{Scenario: "status", Figures: map[string]float64{"session_reads_per_s": 10000, "median_ms": 5}},
	}, Memory: &Memory{Peak: 80}, References: refs}
	cur := Report{Results: []Result{
		{Scenario: "turn", Figures: map[string]float64{"turns": 100}, Latency: map[string]Latency{"post_to_idle": {P50: 12, P99: 45}}},
		{Scenario: "status", Figures: map[string]float64{"session_reads_per_s": 4000, "median_ms": 5.5}, Errors: 2},
		{Scenario: "new", Figures: map[string]float64{"x_per_s": 1}},
	}, Memory: &Memory{Peak: 81}, References: refs}
	got := Compare(base, cur, 0.5)
	var short []string
	for _, l := range got.Worse {
		short = append(short, strings.SplitN(l, " (", 2)[0])
	}
	want := []string{
		"regression: turn post_to_idle p99 ms",
		"errors: status saw 2",
		"regression: status session_reads_per_s",
	}
	if d := cmp.Diff(want, short); d != "" {
		t.Errorf("Compare (-want +got):\n%s\nfull: %q", d, got.Worse)
	}
}

// TestCompareReadsRatios pins that a baseline is read through each
// report's own references: the same binary on a machine half as fast
// (every reference and every timing doubled, the ceiling halved) is no
// regression, while a start-up that grew against the same machine's
// minimal Go server is one, even when its milliseconds did not move.
func TestCompareReadsRatios(t *testing.T) {
	t.Parallel()
	fast := Report{Results: []Result{
		{Scenario: "startup", Figures: map[string]float64{"serve_ms": 6, "version_ms": 2, "idle_rss_mib": 20}},
		{Scenario: "concurrency", Figures: map[string]float64{"turns_per_s": 500}, Latency: map[string]Latency{"turn": {P50: 100, P99: 200}}},
	}, References: &References{CommitCeilingPerS: 8000, GoServerStartMs: 3, GoProgramMs: 1, CPULoopMs: 40}}
	slow := Report{Results: []Result{
		{Scenario: "startup", Figures: map[string]float64{"serve_ms": 12, "version_ms": 4, "idle_rss_mib": 20}},
		{Scenario: "concurrency", Figures: map[string]float64{"turns_per_s": 250}, Latency: map[string]Latency{"turn": {P50: 200, P99: 400}}},
	}, References: &References{CommitCeilingPerS: 4000, GoServerStartMs: 6, GoProgramMs: 2, CPULoopMs: 80}}
	fast.Results = append(fast.Results, Result{Scenario: "ceiling", Figures: map[string]float64{"sqlite_full_commits_per_s": 8000}},
		Result{Scenario: "status", Figures: map[string]float64{"session_reads_per_s": 10000}})
	slow.Results = append(slow.Results, Result{Scenario: "ceiling", Figures: map[string]float64{"sqlite_full_commits_per_s": 4000}},
		Result{Scenario: "status", Figures: map[string]float64{"session_reads_per_s": 5000}})
	if got := Compare(fast, slow, 0.2); len(got.Worse) != 0 || len(got.Unread) != 0 {
		t.Errorf("a slower machine read as a regression: %+v", got)
	}
	grown := slow
	grown.References = &References{CommitCeilingPerS: 4000, GoServerStartMs: 3, GoProgramMs: 2, CPULoopMs: 80}
	if got := Compare(slow, grown, 0.2); len(got.Worse) != 1 || !strings.Contains(got.Worse[0], "startup serve_ms") {
		t.Errorf("a start-up twice the same machine's Go server: got %q, want one serve_ms regression", got.Worse)
	}
	old := fast
	old.References = nil
	if got := Compare(old, slow, 0.2); len(got.Worse) != 0 || len(got.Unread) != 6 {
		t.Errorf("a baseline without references: got %+v, want its 6 timed figures unread", got)
	}
}

// TestComparePacedAsIs pins that a scenario paced by the model's think
// time is not read through the CPU loop: on a machine twice as fast the
// same 2-second think makes the same 6-second turn, which divided by the
// halved CPU reference would read as a server twice as slow. Only the
// overhead beside the think time goes through the reference.
func TestComparePacedAsIs(t *testing.T) {
	t.Parallel()
	paced := func(turnMs, overheadMs, perS float64) Result {
		return Result{Scenario: "paced", Figures: map[string]float64{"model_think_ms_per_step": 2000, "turns_per_s": perS},
			Latency: map[string]Latency{"turn_3_steps": {P50: turnMs, P99: turnMs}, "turn_overhead": {P50: overheadMs, P99: overheadMs}}}
	}
	slow := Report{Results: []Result{paced(6100, 100, 160)}, References: &References{CommitCeilingPerS: 4000, CPULoopMs: 80}}
	fast := Report{Results: []Result{paced(6050, 50, 165)}, References: &References{CommitCeilingPerS: 8000, CPULoopMs: 40}}
	if got := Compare(slow, fast, 0.2); len(got.Worse) != 0 {
		t.Errorf("the same server on a faster machine read as a regression: %q", got.Worse)
	}
	bloated := Report{Results: []Result{paced(6400, 400, 150)}, References: fast.References}
	got := Compare(fast, bloated, 0.2)
	if len(got.Worse) != 2 || !strings.Contains(got.Worse[0], "turn_overhead p50") {
		t.Errorf("an overhead eight times larger: got %q, want its p50 and p99", got.Worse)
	}
}
