package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/bench"
)

// startupFigures is what the bench's start-up measurement found: the
// figures of agentd (and of the --against binaries) and the references.
type startupFigures struct {
	rep      bench.StartupReport
	measured bool
}

// measureStartup measures the start of this agentd (with startup) and of
// each --against binary, interleaved with a minimal Go program and HTTP
// server built here, which are the references for start-up; without
// startup only the references are measured. Without a go command the
// references are left out, with a note.
func (s *benchServer) measureStartup(ctx context.Context, startup bool, against string, runs int) (startupFigures, error) {
	refs, err := bench.BuildRefs(ctx, s.dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v; start-ups are printed without them\n", err)
	}
	o := bench.StartupOptions{Refs: refs, Runs: runs, Dir: s.dir, Config: s.cfg, Env: s.env, Settle: 500 * time.Millisecond, Progress: os.Stderr}
	if startup {
		self, err := os.Executable()
		if err != nil {
			return startupFigures{}, err
		}
		o.Binaries = append(o.Binaries, bench.Binary{Name: "startup", Path: self})
		for _, a := range strings.Split(against, ",") {
			if a = strings.TrimSpace(a); a == "" {
				continue
			}
			name, path, ok := strings.Cut(a, "=")
			if !ok || name == "" || path == "" {
				return startupFigures{}, fmt.Errorf("--against %q: want NAME=PATH", a)
			}
			if path, err = filepath.Abs(path); err != nil {
				return startupFigures{}, err
			}
			o.Binaries = append(o.Binaries, bench.Binary{Name: "startup:" + name, Path: path})
		}
	} else if refs.Server == "" {
		return startupFigures{}, nil
	} else {
		o.Runs = min(runs, 5)
	}
	rep, err := bench.MeasureStartup(ctx, o)
	if err != nil {
		return startupFigures{}, fmt.Errorf("startup: %w", err)
	}
	return startupFigures{rep: rep, measured: true}, nil
}

// addTo puts the start-up figures first in the report and the reference
// programs' times into its references.
func (f startupFigures) addTo(rep *bench.Report) {
	if !f.measured {
		return
	}
	if rep.References == nil {
		rep.References = &bench.References{}
	}
	r := rep.References
	r.GoProgramMs, r.GoServerStartMs = f.rep.ProgramMs, f.rep.ServerMs
	r.GoProgramCPUMs, r.GoServerStartCPUMs = f.rep.ProgramCPUMs, f.rep.ServerCPUMs
	var res []bench.Result
	for _, b := range f.rep.Binaries {
		res = append(res, bench.Result{Scenario: b.Name, Figures: b.Figures})
	}
	rep.Results = append(res, rep.Results...)
}

// printReferences prints the machine's references above the figures.
func printReferences(r *bench.References) {
	if r == nil {
		return
	}
	show := func(v float64, format string) string {
		if v <= 0 {
			return "not measured"
		}
		return fmt.Sprintf(format, v)
	}
	fmt.Println("this machine's references (same run):")
	fmt.Printf("  %-34s %s\n", "commit ceiling (fsync'd SQLite)", show(r.CommitCeilingPerS, "%.0f commits/s"))
	fmt.Printf("  %-34s %s, %s CPU\n", "minimal Go HTTP server, start", show(r.GoServerStartMs, "%.2f ms"), show(r.GoServerStartCPUMs, "%.2f ms"))
	fmt.Printf("  %-34s %s, %s CPU\n", "minimal Go program, run", show(r.GoProgramMs, "%.2f ms"), show(r.GoProgramCPUMs, "%.2f ms"))
	fmt.Printf("  %-34s %s\n\n", "CPU loop (one core, fixed work)", show(r.CPULoopMs, "%.2f ms"))
}

func atP99(s string) string {
	if s == "" {
		return ""
	}
	return s + " at p99"
}
