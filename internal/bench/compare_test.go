package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	base := Report{Results: []Result{
		{Scenario: "turn", Figures: map[string]float64{"turns": 300}, Latency: map[string]Latency{"post_to_idle": {P50: 10, P99: 20}}},
		{Scenario: "status", Figures: map[string]float64{"session_reads_per_s": 10000, "median_ms": 5}},
	}, Memory: &Memory{Peak: 80}}
	cur := Report{Results: []Result{
		{Scenario: "turn", Figures: map[string]float64{"turns": 100}, Latency: map[string]Latency{"post_to_idle": {P50: 12, P99: 45}}},
		{Scenario: "status", Figures: map[string]float64{"session_reads_per_s": 4000, "median_ms": 5.5}, Errors: 2},
		{Scenario: "new", Figures: map[string]float64{"x_per_s": 1}},
	}, Memory: &Memory{Peak: 81}}
	got := Compare(base, cur, 0.5)
	var short []string
	for _, l := range got {
		short = append(short, strings.SplitN(l, " (", 2)[0])
	}
	want := []string{
		"regression: turn post_to_idle p99 ms 20 → 45",
		"errors: status saw 2",
		"regression: status session_reads_per_s 1e+04 → 4000",
	}
	if d := cmp.Diff(want, short); d != "" {
		t.Errorf("Compare (-want +got):\n%s\nfull: %q", d, got)
	}
}
