package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// References are the machine's own yardsticks, measured in the same run
// as the figures: a figure divided by its reference can be compared
// across machines and runs, where milliseconds cannot (one binary
// measured 2.4× apart on two machines of one kind).
type References struct {
	// CommitCeilingPerS is fsync'd SQLite commits per second on the
	// database's disk: what bounds every durable write.
	CommitCeilingPerS float64 `json:"commit_ceiling_per_s,omitempty"`
	// GoServerStartMs is a minimal Go HTTP server's exec to first 200;
	// GoProgramMs a minimal Go program's exec to exit.
	GoServerStartMs float64 `json:"go_server_start_ms,omitempty"`
	GoProgramMs     float64 `json:"go_program_ms,omitempty"`
	// GoServerStartCPUMs and GoProgramCPUMs are the CPU time they used:
	// a start-up's CPU time, read against them, moves less than its
	// milliseconds on a machine others are using.
	GoServerStartCPUMs float64 `json:"go_server_start_cpu_ms,omitempty"`
	GoProgramCPUMs     float64 `json:"go_program_cpu_ms,omitempty"`
	// CPULoopMs is one core's time for a fixed loop (CPULoop).
	CPULoopMs float64 `json:"cpu_loop_ms,omitempty"`
}

// Refs are the reference programs' paths.
type Refs struct {
	Program string
	Server  string
}

// The reference programs: the least a Go program and a Go HTTP server do
// before they answer, built with the same toolchain as agentd.
const (
	refProgram = `package main

import "fmt"

func main() { fmt.Println("0.0.0") }
`
	refServer = `package main

import (
	"flag"
	"net/http"
)

func main() {
	port := flag.String("port", "0", "port")
	flag.Parse()
	http.HandleFunc("/global/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("{\"healthy\":true}"))
	})
	http.ListenAndServe("127.0.0.1:"+*port, nil)
}
`
)

// BuildRefs builds the reference programs into dir with the go command.
// Without one (an operator's machine), it says so and the references
// that need them are left out.
func BuildRefs(ctx context.Context, dir string) (Refs, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return Refs{}, fmt.Errorf("reference programs: no go command to build them: %w", err)
	}
	src := filepath.Join(dir, "refsrc")
	files := map[string]string{
		"go.mod":          "module benchref\n\ngo 1.22\n",
		"program/main.go": refProgram,
		"server/main.go":  refServer,
	}
	for name, text := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return Refs{}, err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return Refs{}, err
		}
	}
	refs := Refs{Program: filepath.Join(dir, "ref-program"), Server: filepath.Join(dir, "ref-server")}
	for out, pkg := range map[string]string{refs.Program: "./program", refs.Server: "./server"} {
		cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, pkg)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
		if b, err := cmd.CombinedOutput(); err != nil {
			return Refs{}, fmt.Errorf("build reference %s: %v: %s", pkg, err, strings.TrimSpace(string(b)))
		}
	}
	return refs, nil
}

// CPULoop runs a fixed amount of single-threaded work (hashing 4 MiB,
// 16 times) and returns the fastest of five tries in milliseconds: the
// machine's single-core speed as this kind of code sees it.
func CPULoop() float64 {
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	best := time.Duration(1 << 62)
	for range 5 {
		start := time.Now()
		sum := sha256.Sum256(buf)
		for range 15 {
			buf[0] = sum[0]
			sum = sha256.Sum256(buf)
		}
		best = min(best, time.Since(start))
	}
	return ms(best)
}

// RefKind is how a figure is read against the references.
type RefKind int

// The kinds of figures.
const (
	// RefNone: compared as is (memory, counts, settings).
	RefNone RefKind = iota
	// RefItself: a reference, which describes the machine, not agentd;
	// never compared.
	RefItself
	// RefCeiling: a rate of turns, bound by durable commits, as a share of
	// the commit ceiling.
	RefCeiling
	// RefServer: a server's start, as a multiple of a minimal Go server's.
	RefServer
	// RefProgram: a command's run, as a multiple of a minimal Go program's.
	RefProgram
	// RefServerCPU and RefProgramCPU: the same for their CPU time.
	RefServerCPU
	RefProgramCPU
	// RefCPU: other milliseconds, as a multiple of the CPU loop.
	RefCPU
	// RefCPURate: other rates (reads, events), bound by the CPU, as what
	// is done in the time of one CPU loop.
	RefCPURate
)

// KindOf says which reference a figure is read against.
func KindOf(scenario, figure string) RefKind {
	switch {
	case scenario == "ceiling" || figure == "commit_ceiling_per_s":
		return RefItself
	case figure == "model_think_ms_per_step":
		return RefNone
	case strings.HasPrefix(scenario, "startup") && figure == "version_ms":
		return RefProgram
	case strings.HasPrefix(scenario, "startup") && figure == "version_cpu_ms":
		return RefProgramCPU
	case strings.HasPrefix(scenario, "startup") && strings.HasSuffix(figure, "_cpu_ms"):
		return RefServerCPU
	case strings.HasPrefix(scenario, "startup") && strings.HasSuffix(figure, "_ms"):
		return RefServer
	case strings.HasSuffix(figure, "_per_s") && strings.Contains(figure, "turns"):
		return RefCeiling
	case strings.HasSuffix(figure, "_per_s"):
		return RefCPURate
	case strings.HasSuffix(figure, "_ms") || strings.Contains(figure, "_ms_"):
		return RefCPU
	}
	return RefNone
}

// Ratio divides a figure by its reference; ok is false when the figure
// has none or the reference was not measured.
func (r *References) Ratio(k RefKind, v float64) (float64, bool) {
	if r == nil {
		return 0, false
	}
	var ref float64
	switch k {
	case RefCeiling:
		ref = r.CommitCeilingPerS
	case RefServer:
		ref = r.GoServerStartMs
	case RefProgram:
		ref = r.GoProgramMs
	case RefServerCPU:
		ref = r.GoServerStartCPUMs
	case RefProgramCPU:
		ref = r.GoProgramCPUMs
	case RefCPU:
		ref = r.CPULoopMs
	case RefCPURate:
		// Per CPU loop: the rate times the loop's seconds.
		if r.CPULoopMs <= 0 {
			return 0, false
		}
		return v * r.CPULoopMs / 1000, true
	}
	if ref <= 0 {
		return 0, false
	}
	return v / ref, true
}

// Describe renders a figure's ratio to its reference for people.
func (r *References) Describe(scenario, figure string, v float64) string {
	k := KindOf(scenario, figure)
	x, ok := r.Ratio(k, v)
	if !ok {
		return ""
	}
	switch k {
	case RefCeiling:
		return fmt.Sprintf("%.2f%% of ceiling", 100*x)
	case RefServer:
		return fmt.Sprintf("%.2f× go server", x)
	case RefProgram:
		return fmt.Sprintf("%.2f× go program", x)
	case RefServerCPU:
		return fmt.Sprintf("%.2f× go server's CPU", x)
	case RefProgramCPU:
		return fmt.Sprintf("%.2f× go program's CPU", x)
	case RefCPURate:
		return fmt.Sprintf("%.4g per cpu loop", x)
	}
	return fmt.Sprintf("%.2f× cpu loop", x)
}
