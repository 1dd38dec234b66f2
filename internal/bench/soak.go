package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Sample is what the soak scenario measured of the server at one moment.
type Sample struct {
	Minutes    float64 `json:"minutes"`
	RSSMiB     float64 `json:"rss_mib"`
	FDs        float64 `json:"open_fds"`
	Goroutines float64 `json:"goroutines"`
	DBMiB      float64 `json:"db_mib"`
	Turns      int64   `json:"turns"`
}

// soak runs a mix of what clients do — reply turns,
// tool turns through bash, aborted slow runs, sessions deleted and
// replaced, SSE streams dropped and resumed with Last-Event-ID — from
// Options.SoakWorkers clients for Options.SoakDuration, and samples the
// server's resident memory, open files, goroutines (from /metrics) and
// database size (Options.DBPath) every Options.Sample. What
// should stay flat is reported as a slope per hour over the samples after
// the first (warm-up).
func (r *runner) soak(ctx context.Context) (Result, error) {
	workers := max(1, r.o.SoakWorkers)
	sample := r.o.Sample
	if sample <= 0 {
		sample = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.SoakDuration)
	defer cancel()

	var turns, aborts, deleted, errs atomic.Int64
	var st sseTally
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { r.reconnectingStream(ctx, &st) })
	}
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			sid := ""
			for ctx.Err() == nil {
				if sid == "" {
					var err error
					if sid, err = r.session(ctx); err != nil {
						if ctx.Err() == nil {
							errs.Add(1)
						}
						continue
					}
				}
				var err error
				switch k := rng.IntN(100); {
				case k < 50:
					err = r.soakTurn(ctx, sid, "reply:soak "+strconv.Itoa(rng.IntN(1e6)))
				case k < 75:
					err = r.soakTurn(ctx, sid, `tool:bash:{"command":"echo soak; ls / | head -3"}`+"\nreply:done")
				case k < 90:
					err = r.soakAbort(ctx, sid, time.Duration(20+rng.IntN(200))*time.Millisecond)
					if err == nil {
						aborts.Add(1)
					}
				default:
					_, err = r.call(ctx, "DELETE", "/session/"+sid, nil, nil)
					if err == nil {
						deleted.Add(1)
					}
					sid = ""
				}
				switch {
				case ctx.Err() != nil:
				case err != nil:
					errs.Add(1)
					if errs.Load() <= 3 {
						r.progress("soak error: %v\n", err)
					}
				default:
					turns.Add(1)
				}
			}
		})
	}

	var samples []Sample
	start := time.Now()
	take := func() {
		s := r.sampleServer(context.WithoutCancel(ctx))
		s.Minutes = time.Since(start).Minutes()
		s.Turns = turns.Load()
		samples = append(samples, s)
		r.progress("soak %.1f min: %d actions, RSS %.1f MiB, %v fds, %v goroutines, DB %.1f MiB",
			s.Minutes, s.Turns, s.RSSMiB, s.FDs, s.Goroutines, s.DBMiB)
	}
	take()
	tick := time.NewTicker(sample)
	for done := false; !done; {
		select {
		case <-tick.C:
			take()
		case <-ctx.Done():
			done = true
		}
	}
	tick.Stop()
	wg.Wait()
	// Let aborted and deleted work settle, then the last sample.
	time.Sleep(500 * time.Millisecond)
	take()

	el := time.Since(start)
	res := Result{Scenario: "soak", Errors: errs.Load(), Samples: samples, Figures: map[string]float64{
		"minutes": el.Minutes(), "actions": float64(turns.Load()), "actions_per_s": float64(turns.Load()) / el.Seconds(),
		"aborts": float64(aborts.Load()), "sessions_deleted": float64(deleted.Load()),
		"sse_reconnects": float64(st.reconnects.Load()), "sse_events": float64(st.events.Load()),
		"sse_gaps": float64(st.gaps.Load()), "sse_duplicates": float64(st.dups.Load()),
		"sse_gaps_announced": float64(st.announced.Load()),
	}}
	after := samples[1:]
	if len(after) >= 2 {
		res.Figures["rss_mib_per_h"] = slope(after, func(s Sample) float64 { return s.RSSMiB })
		res.Figures["fds_per_h"] = slope(after, func(s Sample) float64 { return s.FDs })
		res.Figures["goroutines_per_h"] = slope(after, func(s Sample) float64 { return s.Goroutines })
		res.Figures["db_mib_per_h"] = slope(after, func(s Sample) float64 { return s.DBMiB })
	}
	return res, nil
}

// slope fits a least-squares line through the samples and returns its
// slope per hour.
func slope(s []Sample, y func(Sample) float64) float64 {
	var n, sx, sy, sxx, sxy float64
	for _, p := range s {
		x := p.Minutes / 60
		n++
		sx += x
		sy += y(p)
		sxx += x * x
		sxy += x * y(p)
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// soakTurn sends a prompt and waits for its answer.
func (r *runner) soakTurn(ctx context.Context, sid, text string) error {
	var m struct {
		Info map[string]any `json:"info"`
	}
	if _, err := r.call(ctx, "POST", "/session/"+sid+"/message", r.prompt(text, ""), &m); err != nil {
		return err
	}
	if e := m.Info["error"]; e != nil {
		return fmt.Errorf("turn failed: %v", e)
	}
	return nil
}

// soakAbort starts a slow run, aborts it after a while and waits until the
// session is idle again.
func (r *runner) soakAbort(ctx context.Context, sid string, after time.Duration) error {
	if _, err := r.call(ctx, "POST", "/session/"+sid+"/prompt_async", r.prompt("sleep:30", ""), nil); err != nil {
		return err
	}
	select {
	case <-time.After(after):
	case <-ctx.Done():
		return nil
	}
	if _, err := r.call(ctx, "POST", "/session/"+sid+"/abort", nil, nil); err != nil {
		return err
	}
	_, err := r.call(ctx, "POST", "/session/"+sid+"/wait?timeout=30s", nil, nil)
	return err
}

// sseTally counts what the reconnecting streams saw.
type sseTally struct {
	reconnects, events atomic.Int64
	// gaps are durable events that did not follow their predecessor
	// without a server.gap announcing it, dups those seen twice; both
	// should be zero. announced counts server.gap (events pruned by
	// retention before the stream got to them).
	gaps, dups, announced atomic.Int64
}

// reconnectingStream follows /event, drops the connection after a random
// while and resumes with Last-Event-ID, checking that durable events
// arrive in order, once, without an unannounced hole.
func (r *runner) reconnectingStream(ctx context.Context, t *sseTally) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	last := int64(-1)
	gapOK := false // a server.gap was announced since the last durable event
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, time.Duration(200+rng.IntN(1800))*time.Millisecond)
		req, _ := http.NewRequestWithContext(sctx, "GET", r.node()+"/event", nil)
		if last >= 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
		}
		resp, err := r.http.Do(req)
		if err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			id := int64(-1)
			for sc.Scan() {
				line := sc.Bytes()
				switch {
				case bytes.HasPrefix(line, []byte("id:")):
					id, _ = strconv.ParseInt(string(bytes.TrimSpace(line[3:])), 10, 64)
				case bytes.HasPrefix(line, []byte("data:")):
					if bytes.Contains(line[:min(len(line), 120)], []byte(`"server.gap"`)) {
						t.announced.Add(1)
						gapOK = true
					}
					if id < 0 {
						continue
					}
					switch {
					case last >= 0 && id <= last:
						t.dups.Add(1)
					case last >= 0 && id != last+1 && !gapOK:
						t.gaps.Add(1)
					}
					last, id, gapOK = max(last, id), -1, false
					t.events.Add(1)
				}
			}
			resp.Body.Close()
		}
		cancel()
		t.reconnects.Add(1)
	}
}

// sampleServer reads the server's metrics and database size.
func (r *runner) sampleServer(ctx context.Context) Sample {
	m := r.scrape(ctx)
	s := Sample{Goroutines: m["go_goroutines"], FDs: m["process_open_fds"], RSSMiB: m["process_resident_memory_bytes"] / (1 << 20)}
	if r.o.PID > 0 && s.RSSMiB == 0 {
		s.RSSMiB = rssMiB(r.o.PID)
	}
	if r.o.DBPath != "" {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if fi, err := os.Stat(r.o.DBPath + suffix); err == nil {
				s.DBMiB += float64(fi.Size()) / (1 << 20)
			}
		}
	}
	return s
}
