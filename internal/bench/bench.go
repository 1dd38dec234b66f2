// Package bench is agentd's load tool: it drives any opencode-compatible
// server through its HTTP API, with fakellm as the model so that only the
// server's own cost is measured, and reports throughput, latency
// percentiles and memory.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/core"
)

// Options selects what to measure.
type Options struct {
	// URL is the server; several comma-separated are the nodes of one
	// cluster, to which requests go round-robin as through a load
	// balancer without affinity.
	URL       string
	Model     core.ModelRef
	Scenarios []string
	Turns     int // turn: sequential prompts
	Sessions  int // concurrency and paced: sessions at once
	TurnsEach int // concurrency and paced: turns per session
	// Think is the model's time per step in the paced scenario.
	Think time.Duration
	// CeilingDir is where the ceiling scenario measures the disk: the
	// directory of the server's database (default the temporary one).
	CeilingDir  string
	Busy        int           // status: busy sessions
	Idle        int           // status: idle sessions created beside the busy ones
	Duration    time.Duration // status and fan-out: how long
	Subscribers int           // fan-out: SSE subscribers
	Producers   int           // fan-out: sessions producing events
	// Soak: how long, how often to sample, how many client workers, and
	// the server's database file (for its size; optional).
	SoakDuration time.Duration
	Sample       time.Duration
	SoakWorkers  int
	DBPath       string
	// PID, when known, is sampled for RSS.
	PID      int
	Progress io.Writer
}

// Latency summarises a distribution.
type Latency struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	at := func(q float64) float64 { return ms(d[min(len(d)-1, int(q*float64(len(d))))]) }
	return Latency{Count: len(d), Mean: ms(sum / time.Duration(len(d))), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(d[len(d)-1])}
}

// Result is one scenario's figures.
type Result struct {
	Scenario string             `json:"scenario"`
	Figures  map[string]float64 `json:"figures"`
	Latency  map[string]Latency `json:"latency,omitempty"`
	Errors   int64              `json:"errors"`
	Notes    string             `json:"notes,omitempty"`
	// Samples are the soak scenario's measurements over time.
	Samples []Sample `json:"samples,omitempty"`
}

// Report is the whole run.
type Report struct {
	Target  string   `json:"target"`
	Started string   `json:"started"`
	Results []Result `json:"results"`
	Memory  *Memory  `json:"memory,omitempty"`
	// References are this machine's yardsticks from the same run; a
	// baseline is compared through them.
	References *References `json:"references,omitempty"`
}

// Memory is the server's resident set size, in MiB.
type Memory struct {
	Before float64 `json:"before_mib"`
	Peak   float64 `json:"peak_mib"`
	After  float64 `json:"after_mib"`
}

type runner struct {
	o     Options
	nodes []string
	rr    atomic.Uint64
	http  *http.Client
	peak  atomic.Int64
	// scenarioPeak is the peak RSS since the running scenario began.
	scenarioPeak atomic.Int64
	// ceiling is the commit rate measured by the ceiling scenario.
	ceiling float64
}

// node returns the next node, round-robin.
func (r *runner) node() string {
	return r.nodes[(r.rr.Add(1)-1)%uint64(len(r.nodes))]
}

// Run executes the scenarios in order.
func Run(ctx context.Context, o Options) (Report, error) {
	r := &runner{o: o, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096, MaxConnsPerHost: 0}}}
	for _, u := range strings.Split(o.URL, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
			r.nodes = append(r.nodes, u)
		}
	}
	if len(r.nodes) == 0 {
		return Report{}, errors.New("no server URL")
	}
	rep := Report{Target: o.URL, Started: time.Now().UTC().Format(time.RFC3339), References: &References{}}
	r.progress("references …")
	rep.References.CPULoopMs = CPULoop()
	if !slices.Contains(o.Scenarios, "ceiling") {
		// Rates are read against the commit ceiling, measured anyway.
		if _, err := r.measureCeiling(ctx); err != nil {
			return rep, fmt.Errorf("ceiling: %w", err)
		}
	}
	var stopSampling func()
	if o.PID > 0 {
		before := rssMiB(o.PID)
		rep.Memory = &Memory{Before: before}
		stopSampling = r.sampleRSS(o.PID)
	}
	for _, sc := range o.Scenarios {
		r.progress("%s …", sc)
		var res Result
		var err error
		switch sc {
		case "turn":
			res, err = r.turn(ctx)
		case "ceiling":
			res, err = r.measureCeiling(ctx)
		case "concurrency":
			res, err = r.concurrency(ctx, sc, 0, false)
		case "paced":
			res, err = r.concurrency(ctx, sc, r.o.Think, false)
		case "concurrency-async":
			res, err = r.concurrency(ctx, sc, 0, true)
		case "paced-async":
			res, err = r.concurrency(ctx, sc, r.o.Think, true)
		case "status":
			res, err = r.status(ctx)
		case "fanout":
			res, err = r.fanout(ctx)
		case "soak":
			res, err = r.soak(ctx)
		default:
			err = fmt.Errorf("unknown scenario %q", sc)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", sc, err)
		}
		rep.Results = append(rep.Results, res)
		r.progress("%s done\n", sc)
	}
	rep.References.CommitCeilingPerS = r.ceiling
	if stopSampling != nil {
		stopSampling()
		rep.Memory.Peak = float64(r.peak.Load()) / 1024
		rep.Memory.After = rssMiB(o.PID)
	}
	return rep, nil
}

func (r *runner) progress(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "\r\033[K"+format, args...)
	}
}

// rssMiB reads VmRSS of a process.
func rssMiB(pid int) float64 {
	return float64(rssKiB(pid)) / 1024
}

func rssKiB(pid int) int64 {
	return procStatus(pid)["VmRSS"]
}

// procStatus reads the kB figures of /proc/PID/status (VmRSS, RssAnon,
// …); empty when the process is gone.
func procStatus(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if f := strings.Fields(rest); ok && len(f) == 2 && f[1] == "kB" {
			out[name], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	return out
}

func (r *runner) sampleRSS(pid int) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			k := rssKiB(pid)
			if k > r.peak.Load() {
				r.peak.Store(k)
			}
			if k > r.scenarioPeak.Load() {
				r.scenarioPeak.Store(k)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// api helpers

func (r *runner) call(ctx context.Context, method, path string, body any, out any) (int, error) {
	return r.callAt(ctx, r.node(), method, path, body, out)
}

// callAt makes a request to one node.
func (r *runner) callAt(ctx context.Context, node, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, node+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil && len(b) > 0 {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

func (r *runner) session(ctx context.Context) (string, error) {
	var s struct {
		ID string `json:"id"`
	}
	_, err := r.call(ctx, "POST", "/session", map[string]any{"title": "bench"}, &s)
	return s.ID, err
}

func (r *runner) prompt(text, messageID string) map[string]any {
	b := map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}, "model": r.o.Model}
	if messageID != "" {
		b["messageID"] = messageID
	}
	return b
}

// sseEvent is one decoded event of a stream.
type sseEvent struct {
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

// subscribe opens /event and calls fn for each event until ctx ends. It
// returns once the stream is connected.
func (r *runner) subscribe(ctx context.Context, fn func(sseEvent)) error {
	return r.subscribeAt(ctx, r.node(), fn)
}

// subscribeAt is subscribe on one node.
func (r *runner) subscribeAt(ctx context.Context, node string, fn func(sseEvent)) error {
	req, err := http.NewRequestWithContext(ctx, "GET", node+"/event", nil)
	if err != nil {
		return err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return fmt.Errorf("GET /event: %d", resp.StatusCode)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.HasPrefix(line, []byte("data:")) {
				continue
			}
			var ev sseEvent
			if json.Unmarshal(bytes.TrimSpace(line[5:]), &ev) == nil {
				fn(ev)
			}
		}
	}()
	return nil
}

func sessionOf(props json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionID"`
		Info      struct {
			ID        string `json:"id"`
			SessionID string `json:"sessionID"`
		} `json:"info"`
	}
	_ = json.Unmarshal(props, &p)
	if p.SessionID != "" {
		return p.SessionID
	}
	return p.Info.SessionID
}

var errTimeout = errors.New("timed out")
