package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Comparison is what Compare found.
type Comparison struct {
	// Worse lists the figures worse by more than the tolerance, and
	// errors, one line each.
	Worse []string
	// Unread lists figures that could not be compared because one of the
	// reports lacks the reference they are read against.
	Unread []string
}

// Compare lists the figures of cur that are worse than in base by more
// than tolerance (0.5: half as good again). Figures that depend on the
// machine's speed are compared as ratios to each report's own references
// (rates to the commit ceiling, start-ups to a minimal Go server or
// program, other milliseconds to the CPU loop), never as absolute
// milliseconds: a baseline written on another machine then still means
// something. Memory is compared as is. Rates are better higher, the rest
// lower; counts of work done, set by the options, are not compared.
// Errors are always reported. It is a report, not a verdict: timings on a
// shared machine move.
func Compare(base, cur Report, tolerance float64) Comparison {
	c := comparer{base: base.References, cur: cur.References, tolerance: tolerance}
	prev := map[string]Result{}
	for _, r := range base.Results {
		prev[r.Scenario] = r
	}
	for _, r := range cur.Results {
		if r.Errors > 0 {
			c.out.Worse = append(c.out.Worse, fmt.Sprintf("errors: %s saw %d", r.Scenario, r.Errors))
		}
		if b, ok := prev[r.Scenario]; ok {
			c.result(b, r)
		}
	}
	if base.Memory != nil && cur.Memory != nil {
		c.worse("memory peak MiB", base.Memory.Peak, cur.Memory.Peak, false)
	}
	return c.out
}

// comparer holds what Compare found so far.
type comparer struct {
	base, cur *References
	tolerance float64
	out       Comparison
}

// result compares one scenario's figures and latencies.
func (c *comparer) result(b, r Result) {
	paced := thinkBound(b) || thinkBound(r)
	for _, name := range sortedKeys(r.Figures) {
		was, ok := b.Figures[name]
		if !ok {
			continue
		}
		switch {
		case paced && name == "turns_per_s":
			c.worse(r.Scenario+" "+name+" (as is: paced by the model)", was, r.Figures[name], true)
		case strings.HasSuffix(name, "_per_s"):
			c.figure(r.Scenario, name, r.Scenario+" "+name, was, r.Figures[name], true)
		case strings.HasSuffix(name, "_ms") || strings.HasSuffix(name, "_mib"):
			c.figure(r.Scenario, name, r.Scenario+" "+name, was, r.Figures[name], false)
		}
	}
	for _, name := range sortedKeys(r.Latency) {
		was, ok := b.Latency[name]
		if !ok {
			continue
		}
		now := r.Latency[name]
		if paced && !strings.Contains(name, "overhead") {
			// The model's fixed think time is most of such a latency:
			// divided by the CPU loop it would read a faster machine as
			// a slower server. The overhead beside it is compared
			// through the reference.
			c.worse(r.Scenario+" "+name+" p50 ms (as is: paced by the model)", was.P50, now.P50, false)
			c.worse(r.Scenario+" "+name+" p99 ms (as is: paced by the model)", was.P99, now.P99, false)
			continue
		}
		c.figure(r.Scenario, "latency_ms", r.Scenario+" "+name+" p50 ms", was.P50, now.P50, false)
		c.figure(r.Scenario, "latency_ms", r.Scenario+" "+name+" p99 ms", was.P99, now.P99, false)
	}
}

// thinkBound reports whether a scenario's model waited a fixed time before
// each answer, so that its turn latency and rate are set by that wait more
// than by the machine.
func thinkBound(r Result) bool {
	return r.Figures["model_think_ms_per_step"] > 0
}

// figure compares one figure through its reference.
func (c *comparer) figure(scenario, name, label string, was, now float64, higherIsBetter bool) {
	k := KindOf(scenario, name)
	switch k {
	case RefItself:
		return
	case RefNone:
		c.worse(label, was, now, higherIsBetter)
		return
	}
	bw, ok1 := c.base.Ratio(k, was)
	cw, ok2 := c.cur.Ratio(k, now)
	if !ok1 || !ok2 {
		c.out.Unread = append(c.out.Unread, label)
		return
	}
	c.worse(label+" (÷ reference)", bw, cw, higherIsBetter)
}

// worse notes a figure that got worse by more than the tolerance.
func (c *comparer) worse(what string, was, now float64, higherIsBetter bool) {
	if was <= 0 {
		return
	}
	change := (now - was) / was
	if higherIsBetter {
		change = (was - now) / was
	}
	if change > c.tolerance {
		c.out.Worse = append(c.out.Worse, fmt.Sprintf("regression: %s %.4g → %.4g (%+.0f%%, tolerance %.0f%%)", what, was, now,
			100*(now-was)/was, 100*c.tolerance))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
