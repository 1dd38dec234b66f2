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

// StartupFigures are one binary's medians.
type StartupFigures struct {
	Name string
	// VersionMs is `--version` from exec to exit; ServeMs is `serve` from
	// exec to its first 200 on /global/health, on a fresh database (which
	// it creates); RestartMs the same on the database the first start
	// left, as every restart after the first is.
	VersionMs float64
	ServeMs   float64
	RestartMs float64
	// IdleRSSMiB is the server's resident set after Settle; IdleAnonMiB
	// the part of it that is its own memory rather than pages of the
	// binary's file (which the page cache shares).
	IdleRSSMiB  float64
	IdleAnonMiB float64
}

// StartupReport is the start-up measurement: each binary's medians and the
// reference programs' medians from the same rounds.
type StartupReport struct {
	Binaries []StartupFigures
	// ProgramMs and ServerMs are the reference programs' medians (0: not
	// measured).
	ProgramMs float64
	ServerMs  float64
}

// MeasureStartup starts every binary and reference program Runs times,
// interleaved and in a rotating order, so that a machine that slows down
// or speeds up during the run moves all of them alike.
func MeasureStartup(ctx context.Context, o StartupOptions) (StartupReport, error) {
	type sample struct{ version, serve, restart, rss, anon []float64 }
	samples := make([]sample, len(o.Binaries))
	var progRuns, srvRuns []float64
	for round := range max(o.Runs, 1) {
		progress(o.Progress, "startup round %d/%d", round+1, o.Runs)
		// Slot -1 is the reference; the order rotates each round.
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
			if i < 0 {
				if o.Refs.Program != "" {
					d, err := timeRun(ctx, o.Refs.Program)
					if err != nil {
						return StartupReport{}, fmt.Errorf("reference program: %w", err)
					}
					progRuns = append(progRuns, d)
				}
				if o.Refs.Server != "" {
					d, _, _, err := timeServe(ctx, []string{o.Refs.Server}, nil, 0)
					if err != nil {
						return StartupReport{}, fmt.Errorf("reference server: %w", err)
					}
					srvRuns = append(srvRuns, d)
				}
				continue
			}
			b := o.Binaries[i]
			v, err := timeRun(ctx, b.Path, "--version")
			if err != nil {
				return StartupReport{}, fmt.Errorf("%s --version: %w", b.Name, err)
			}
			db := filepath.Join(o.Dir, fmt.Sprintf("start-%d-%d.db", round, i))
			argv := []string{b.Path, "serve", "--db", db, "--log-level", "error"}
			if o.Config != "" {
				argv = append(argv, "--config", o.Config)
			}
			s, rss, anon, err := timeServe(ctx, argv, o.Env, o.Settle)
			if err != nil {
				return StartupReport{}, fmt.Errorf("%s serve: %w", b.Name, err)
			}
			again, _, _, err := timeServe(ctx, argv, o.Env, 0)
			if err != nil {
				return StartupReport{}, fmt.Errorf("%s serve again: %w", b.Name, err)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(db + suffix)
			}
			sm := &samples[i]
			sm.version, sm.serve, sm.restart = append(sm.version, v), append(sm.serve, s), append(sm.restart, again)
			sm.rss, sm.anon = append(sm.rss, rss), append(sm.anon, anon)
		}
	}
	rep := StartupReport{ProgramMs: median(progRuns), ServerMs: median(srvRuns)}
	for i, b := range o.Binaries {
		sm := samples[i]
		rep.Binaries = append(rep.Binaries, StartupFigures{Name: b.Name, VersionMs: median(sm.version), ServeMs: median(sm.serve), RestartMs: median(sm.restart),
			IdleRSSMiB: median(sm.rss), IdleAnonMiB: median(sm.anon)})
	}
	return rep, nil
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

// timeRun runs a program to its exit and returns how long that took.
func timeRun(ctx context.Context, path string, args ...string) (float64, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, err
	}
	return ms(time.Since(start)), nil
}

// timeServe starts the server argv with --port added, and returns the
// time to its first 200 on /global/health, then, after settle, its RSS
// and anonymous RSS in MiB. The server is stopped before it returns.
func timeServe(ctx context.Context, argv, env []string, settle time.Duration) (float64, float64, float64, error) {
	port, err := freePort()
	if err != nil {
		return 0, 0, 0, err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/global/health"
	cmd := exec.Command(argv[0], append(argv[1:], "--port", strconv.Itoa(port))...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
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
			return 0, 0, 0, errors.New("never answered /global/health")
		}
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
	d := ms(time.Since(start))
	if settle <= 0 {
		return d, 0, 0, nil
	}
	select {
	case <-ctx.Done():
		return 0, 0, 0, ctx.Err()
	case <-time.After(settle):
	}
	st := procStatus(cmd.Process.Pid)
	return d, float64(st["VmRSS"]) / 1024, float64(st["RssAnon"]) / 1024, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
