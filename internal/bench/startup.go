package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Binary is one agentd build whose start-up is measured: the current one,
// or an earlier one built from another commit for a same-run comparison.
type Binary struct {
	Name string
	Path string
}

// StartupOptions says what the start-up measurement runs.
type StartupOptions struct {
	Binaries []Binary
	// Refs are the reference programs; empty paths skip those.
	Refs Refs
	// Runs is how many times each program is started; the figures are
	// medians.
	Runs int
	// Dir holds the fresh databases; Config is the server's config file
	// and Env is added to its environment.
	Dir    string
	Config string
	Env    []string
	// Settle is how long a started server is left idle before its RSS is
	// read.
	Settle   time.Duration
	Progress io.Writer
}

// StartupFigures are one binary's medians, by name:
//
//   - version_ms: `--version` from exec to exit; version_cpu_ms the CPU
//     time it used (from its rusage), which a busy machine moves less;
//   - serve_ms: `serve` from exec to its first 200 on /global/health on a
//     fresh database (which it creates), serve_cpu_ms the CPU time its
//     threads used until then (/proc/PID/task/*/schedstat);
//   - restart_ms, restart_cpu_ms: the same on the database the first
//     start left, as every restart after the first is;
//   - idle_rss_mib: the server's resident set after Settle, idle_anon_mib
//     the part that is its own memory rather than pages of the binary's
//     file (which the page cache shares).
type StartupFigures struct {
	Name    string
	Figures map[string]float64
}

// StartupReport is the start-up measurement: each binary's medians and the
// reference programs' medians from the same rounds (0: not measured).
type StartupReport struct {
	Binaries []StartupFigures
	// ProgramMs and ProgramCPUMs: the minimal Go program's run; ServerMs
	// and ServerCPUMs: the minimal Go server's start.
	ProgramMs, ProgramCPUMs float64
	ServerMs, ServerCPUMs   float64
}

// samples collects one program's measurements by figure.
type samples map[string][]float64

func (s samples) add(name string, v float64) { s[name] = append(s[name], v) }

func (s samples) medians() map[string]float64 {
	out := map[string]float64{}
	for k, v := range s {
		out[k] = median(v)
	}
	return out
}

// MeasureStartup starts every binary and reference program Runs times,
// interleaved and in a rotating order, so that a machine that slows down
// or speeds up during the run moves all of them alike.
func MeasureStartup(ctx context.Context, o StartupOptions) (StartupReport, error) {
	bins := make([]samples, len(o.Binaries))
	for i := range bins {
		bins[i] = samples{}
	}
	refs := samples{}
	for round := range max(o.Runs, 1) {
		progress(o.Progress, "startup round %d/%d", round+1, o.Runs)
		// Slot -1 is the references; the order rotates each round.
		slots := make([]int, 0, len(o.Binaries)+1)
		for i := -1; i < len(o.Binaries); i++ {
			slots = append(slots, i)
		}
		k := round % len(slots)
		slots = append(slots[k:], slots[:k]...)
		for _, i := range slots {
			if err := ctx.Err(); err != nil {
				return StartupReport{}, err
			}
			var err error
			if i < 0 {
				err = measureRefs(ctx, o.Refs, refs)
			} else {
				db := filepath.Join(o.Dir, fmt.Sprintf("start-%d-%d.db", round, i))
				err = measureBinary(ctx, o, o.Binaries[i].Path, db, bins[i])
				for _, suffix := range []string{"", "-wal", "-shm"} {
					os.Remove(db + suffix)
				}
				if err != nil {
					err = fmt.Errorf("%s: %w", o.Binaries[i].Name, err)
				}
			}
			if err != nil {
				return StartupReport{}, err
			}
		}
	}
	r := refs.medians()
	rep := StartupReport{ProgramMs: r["program_ms"], ProgramCPUMs: r["program_cpu_ms"], ServerMs: r["server_ms"], ServerCPUMs: r["server_cpu_ms"]}
	for i, b := range o.Binaries {
		rep.Binaries = append(rep.Binaries, StartupFigures{Name: b.Name, Figures: bins[i].medians()})
	}
	return rep, nil
}

// measureRefs runs the reference program and server once each.
func measureRefs(ctx context.Context, refs Refs, s samples) error {
	if refs.Program != "" {
		wall, cpu, err := timeRun(ctx, refs.Program)
		if err != nil {
			return fmt.Errorf("reference program: %w", err)
		}
		s.add("program_ms", wall)
		s.add("program_cpu_ms", cpu)
	}
	if refs.Server != "" {
		st, err := timeServe(ctx, []string{refs.Server}, nil, 0)
		if err != nil {
			return fmt.Errorf("reference server: %w", err)
		}
		s.add("server_ms", st.wall)
		s.add("server_cpu_ms", st.cpu)
	}
	return nil
}

// measureBinary runs `--version`, then `serve` on the fresh database db,
// then `serve` again on what it left.
func measureBinary(ctx context.Context, o StartupOptions, bin, db string, s samples) error {
	wall, cpu, err := timeRun(ctx, bin, "--version")
	if err != nil {
		return fmt.Errorf("--version: %w", err)
	}
	s.add("version_ms", wall)
	s.add("version_cpu_ms", cpu)
	argv := []string{bin, "serve", "--db", db, "--log-level", "error"}
	if o.Config != "" {
		argv = append(argv, "--config", o.Config)
	}
	first, err := timeServe(ctx, argv, o.Env, o.Settle)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	again, err := timeServe(ctx, argv, o.Env, 0)
	if err != nil {
		return fmt.Errorf("serve again: %w", err)
	}
	s.add("serve_ms", first.wall)
	s.add("serve_cpu_ms", first.cpu)
	s.add("restart_ms", again.wall)
	s.add("restart_cpu_ms", again.cpu)
	s.add("idle_rss_mib", first.rss)
	s.add("idle_anon_mib", first.anon)
	return nil
}

func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "\r\033[K"+format, args...)
	}
}

// median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timeRun runs a program to its exit and returns how long that took and
// the CPU time it used, in milliseconds.
func timeRun(ctx context.Context, path string, args ...string) (float64, float64, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, err
	}
	wall := ms(time.Since(start))
	return wall, ms(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()), nil
}

// started is what timeServe measured: milliseconds to the first healthy
// answer and CPU milliseconds used by then; MiB resident and anonymous
// after the settle time.
type started struct{ wall, cpu, rss, anon float64 }

// timeServe starts the server argv with --port added and measures its
// start; the server is stopped before it returns.
func timeServe(ctx context.Context, argv, env []string, settle time.Duration) (started, error) {
	port, err := freePort()
	if err != nil {
		return started{}, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/global/health"
	cmd := exec.Command(argv[0], append(argv[1:], "--port", strconv.Itoa(port))...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return started{}, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	deadline := start.Add(30 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return started{}, errors.New("never answered /global/health")
		}
		select {
		case <-ctx.Done():
			return started{}, ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
	res := started{wall: ms(time.Since(start)), cpu: cpuMs(cmd.Process.Pid)}
	if settle <= 0 {
		return res, nil
	}
	select {
	case <-ctx.Done():
		return started{}, ctx.Err()
	case <-time.After(settle):
	}
	st := procStatus(cmd.Process.Pid)
	res.rss, res.anon = float64(st["VmRSS"])/1024, float64(st["RssAnon"])/1024
	return res, nil
}

// cpuMs is the CPU time all of a process's threads have used, from each
// one's schedstat (nanoseconds, where /proc/PID/stat counts 10 ms ticks).
// Threads that already exited are not counted; a Go program's seldom do.
func cpuMs(pid int) float64 {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			ns += n
		}
	}
	return float64(ns) / 1e6
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
