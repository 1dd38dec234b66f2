package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/tool"
)

// BenchmarkReadFewLinesOfBigFile reads 5 lines from the middle of a 50 MB
// file: the memory it takes (B/op) must not depend on the file's size.
func BenchmarkReadFewLinesOfBigFile(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	line := strings.Repeat("x", 99) + "\n"
	f, err := os.Create(filepath.Join(ws, "big.txt"))
	if err != nil {
		b.Fatal(err)
	}
	chunk := strings.Repeat(line, 10_000)
	for range 50 {
		f.WriteString(chunk)
	}
	f.Close()
	in, _ := json.Marshal(map[string]any{"filePath": "big.txt", "offset": 250_000, "limit": 5})
	b.ReportAllocs()
	for b.Loop() {
		res, err := Read{}.Run(context.Background(), tool.Call{Directory: ws, Input: in})
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkBashCall is what the sandbox costs a bash call (bash -c true,
// the whole tool: temporary directory, ruleset, trampoline), against the
// same call unconfined, in the same run. The trampoline starts this test
// binary, smaller than agentd's: see BenchmarkConfinedTrue in
// internal/sandbox for agentd's own.
func BenchmarkBashCall(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	in, _ := json.Marshal(map[string]any{"command": "true"})
	var confined *sandbox.Sandbox
	if sandbox.ABI() > 0 {
		confined, _ = sandbox.New(sandbox.Config{})
	}
	for _, c := range []struct {
		name string
		s    *sandbox.Sandbox
	}{{"unconfined", nil}, {"confined", confined}} {
		b.Run(c.name, func(b *testing.B) {
			if c.name == "confined" && c.s == nil {
				b.Skip("no Landlock")
			}
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := Bash{}.Run(context.Background(), tool.Call{Directory: ws, Input: in, Sandbox: c.s})
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
				took = append(took, time.Since(start))
			}
			reportPercentiles(b, took)
		})
	}
}

// reportPercentiles reports the median and the 99th percentile of took.
func reportPercentiles(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	ms := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// BenchmarkBashNeeds is the cost of judging a typical agent command before
// it runs: parse, expansions, and a path check of every argument.
func BenchmarkBashNeeds(b *testing.B) {
	ws := b.TempDir()
	for _, cmd := range []string{
		"go test ./...",
		`cd sub && for f in *.go; do gofmt -l "$f"; done | head -20 > out.txt; git status --short && echo "done $(date)"`,
	} {
		in, _ := json.Marshal(map[string]string{"command": cmd})
		call := tool.Call{Directory: ws, Input: in}
		b.Run(strconv.Itoa(len(cmd)), func(b *testing.B) {
			for b.Loop() {
				Bash{}.Needs(call)
			}
		})
	}
}

// BenchmarkSweep is start-up's scan for the tool processes a previous
// agentd left: every process's environment read once (it grows with the
// machine's process count, and its CPU is part of every restart's).
func BenchmarkSweep(b *testing.B) {
	for b.Loop() {
		killMarked(func(string) bool { return false })
	}
}
