package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Compare lists the figures of cur that are worse than in base by more
// than tolerance (0.5: half as good again), one line each. Latencies,
// milliseconds and memory are better lower; rates (per second) better
// higher; counts of work done, set by the options, are not compared.
// Errors are always reported. It is a report, not a verdict: timings on a
// shared machine move.
func Compare(base, cur Report, tolerance float64) []string {
	var out []string
	worse := func(what string, was, now float64, higherIsBetter bool) {
		if was <= 0 {
			return
		}
		change := (now - was) / was
		if higherIsBetter {
			change = (was - now) / was
		}
		if change > tolerance {
			out = append(out, fmt.Sprintf("regression: %s %.4g → %.4g (%+.0f%%, tolerance %.0f%%)", what, was, now,
				100*(now-was)/was, 100*tolerance))
		}
	}
	prev := map[string]Result{}
	for _, r := range base.Results {
		prev[r.Scenario] = r
	}
	for _, r := range cur.Results {
		if r.Errors > 0 {
			out = append(out, fmt.Sprintf("errors: %s saw %d", r.Scenario, r.Errors))
		}
		b, ok := prev[r.Scenario]
		if !ok {
			continue
		}
		for _, name := range sortedKeys(r.Figures) {
			was, ok := b.Figures[name]
			if !ok {
				continue
			}
			switch {
			case strings.HasSuffix(name, "_per_s"):
				worse(r.Scenario+" "+name, was, r.Figures[name], true)
			case strings.HasSuffix(name, "_ms") || strings.HasSuffix(name, "_mib"):
				worse(r.Scenario+" "+name, was, r.Figures[name], false)
			}
		}
		for _, name := range sortedKeys(r.Latency) {
			was, ok := b.Latency[name]
			if !ok {
				continue
			}
			worse(r.Scenario+" "+name+" p50 ms", was.P50, r.Latency[name].P50, false)
			worse(r.Scenario+" "+name+" p99 ms", was.P99, r.Latency[name].P99, false)
		}
	}
	if base.Memory != nil && cur.Memory != nil {
		worse("memory peak MiB", base.Memory.Peak, cur.Memory.Peak, false)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
