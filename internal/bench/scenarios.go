package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store/sqlite"
)

// turn: sequential reply: prompts; latency from prompt_async to the
// session.idle event of that session.
func (r *runner) turn(ctx context.Context) (Result, error) {
	sid, err := r.session(ctx)
	if err != nil {
		return Result{}, err
	}
	idle := make(chan struct{}, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r.subscribe(sctx, func(ev sseEvent) {
		if ev.Type == core.EventSessionIdle && sessionOf(ev.Properties) == sid {
			select {
			case idle <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		return Result{}, err
	}
	var lat []time.Duration
	var errs int64
	var before serverCost
	for i := 0; i < r.o.Turns+5; i++ {
		if i == 5 {
			before = r.serverCost(ctx)
		}
		start := time.Now()
		if _, err := r.call(ctx, "POST", "/session/"+sid+"/prompt_async", r.prompt("reply:ok", ""), nil); err != nil {
			errs++
			continue
		}
		select {
		case <-idle:
		case <-time.After(30 * time.Second):
			return Result{}, fmt.Errorf("turn %d: no session.idle: %w", i, errTimeout)
		}
		if i >= 5 { // warm-up
			lat = append(lat, time.Since(start))
		}
		if i%20 == 0 {
			r.progress("turn %d/%d", i, r.o.Turns)
		}
	}
	res := Result{Scenario: "turn", Errors: errs, Latency: map[string]Latency{"post_to_idle": summarize(lat)},
		Figures: map[string]float64{"turns": float64(len(lat))}}
	r.perTurn(res.Figures, before, r.serverCost(ctx), len(lat))
	return res, nil
}

// concurrency: many sessions at once, each running 3-step tool
// conversations back to back, through the blocking prompt route (a
// connection held per turn) or, async, through prompt_async with every
// turn's end read from one shared event stream, as large orchestrators
// drive a server. With think > 0 the model takes that long before each of
// its three answers (a real model's time), and the turn's overhead is its
// latency less those three waits: what the server added.
func (r *runner) concurrency(ctx context.Context, name string, think time.Duration, async bool) (Result, error) {
	prompt := "tool:list:{}\ntool:list:{}\nreply:done"
	if think > 0 {
		prompt = fmt.Sprintf("think:%g\n", think.Seconds()) + prompt
	}
	const steps = 3
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var done atomic.Int64
	ends, stopEnds, err := r.watchTurnEnds(ctx, async)
	if err != nil {
		return Result{}, err
	}
	defer stopEnds()
	before := r.serverCost(ctx)
	stopQueue := r.queueSampler(ctx)
	r.scenarioPeak.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range r.o.Sessions {
		wg.Go(func() {
			sid, err := r.session(ctx)
			if err != nil {
				errs.Add(1)
				return
			}
			if think > 0 {
				// Sessions start spread over one turn's model time, as
				// people's do, rather than all in the same millisecond.
				select {
				case <-time.After(time.Duration(i) * steps * think / time.Duration(r.o.Sessions)):
				case <-ctx.Done():
					return
				}
			}
			for range r.o.TurnsEach {
				t0 := time.Now()
				if err := r.toolTurn(ctx, sid, prompt, ends); err != nil {
					errs.Add(1)
					continue
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				if n := done.Add(1); n%50 == 0 {
					r.progress("%s %d/%d turns", name, n, r.o.Sessions*r.o.TurnsEach)
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	after := r.serverCost(ctx)
	qMean, qPeak := stopQueue()
	res := Result{Scenario: name, Errors: errs.Load(), Latency: map[string]Latency{},
		Figures: map[string]float64{"sessions": float64(r.o.Sessions), "turns": float64(len(lat)), "turns_per_s": float64(len(lat)) / el.Seconds()}}
	if len(r.nodes) == 1 {
		res.Figures["write_queue_mean"], res.Figures["write_queue_max"] = qMean, qPeak
	}
	if peak := r.scenarioPeak.Load(); peak > 0 && before.rssKiB > 0 {
		// What each session held at the peak, beyond the server at rest.
		res.Figures["rss_kib_per_session"] = float64(peak-before.rssKiB) / float64(r.o.Sessions)
	}
	if think > 0 {
		res.Figures["model_think_ms_per_step"] = float64(think.Milliseconds())
		res.Latency["turn_overhead"] = overhead(lat, steps*think)
	}
	res.Latency["turn_3_steps"] = summarize(lat)
	r.perTurn(res.Figures, before, after, len(lat))
	if r.ceiling > 0 && think == 0 {
		// Paced turns are bound by the model's time, not by the server.
		res.Figures["commit_ceiling_per_s"] = r.ceiling
		res.Figures["turns_per_s_of_ceiling_pct"] = 100 * res.Figures["turns_per_s"] / r.ceiling
	}
	return res, nil
}

// overhead summarizes what turns took beyond the model's own time.
func overhead(lat []time.Duration, model time.Duration) Latency {
	over := make([]time.Duration, len(lat))
	for i, d := range lat {
		over[i] = d - model
	}
	return summarize(over)
}

// ceiling: the commit rate of a SQLite database with agentd's settings on
// the disk the server's database is on (the bench's own directory when it
// started the server), for the other scenarios to be read against.
func (r *runner) measureCeiling(ctx context.Context) (Result, error) {
	dir := r.o.CeilingDir
	if dir == "" {
		dir = os.TempDir()
	}
	rate, err := sqlite.CommitCeiling(ctx, dir, 2*time.Second)
	if err != nil {
		return Result{}, err
	}
	r.ceiling = rate
	return Result{Scenario: "ceiling", Figures: map[string]float64{"sqlite_full_commits_per_s": rate}}, nil
}

// status: per-session and list reads at full rate while sessions are busy.
func (r *runner) status(ctx context.Context) (Result, error) {
	// Idle sessions beside the busy ones, so that lookups are not served
	// from a tiny table.
	var wgIdle sync.WaitGroup
	var idleErr atomic.Int64
	sem := make(chan struct{}, 16)
	for range r.o.Idle {
		sem <- struct{}{}
		wgIdle.Go(func() {
			defer func() { <-sem }()
			if _, err := r.session(ctx); err != nil {
				idleErr.Add(1)
			}
		})
	}
	wgIdle.Wait()
	if n := idleErr.Load(); n > 0 {
		return Result{}, fmt.Errorf("creating idle sessions: %d failed", n)
	}
	var busy []string
	for range r.o.Busy {
		sid, err := r.session(ctx)
		if err != nil {
			return Result{}, err
		}
		if _, err := r.call(ctx, "POST", "/session/"+sid+"/prompt_async", r.prompt("sleep:600", ""), nil); err != nil {
			return Result{}, err
		}
		busy = append(busy, sid)
	}
	defer func() {
		for _, sid := range busy {
			r.call(context.WithoutCancel(ctx), "POST", "/session/"+sid+"/abort", nil, nil)
		}
	}()
	// Per-session status is agentd's route; opencode has only the list.
	perSession := true
	if _, err := r.call(ctx, "GET", "/session/"+busy[0]+"/status", nil, nil); err != nil {
		perSession = false
	}
	res := Result{Scenario: "status", Figures: map[string]float64{"busy_sessions": float64(r.o.Busy), "idle_sessions_added": float64(r.o.Idle)}, Latency: map[string]Latency{}}
	kinds := []string{"list"}
	if perSession {
		kinds = append([]string{"session"}, kinds...)
	} else {
		res.Notes = "no per-session status route; list only"
	}
	for _, kind := range kinds {
		var mu sync.Mutex
		var lat []time.Duration
		var errs atomic.Int64
		dctx, cancel := context.WithTimeout(ctx, r.o.Duration)
		var wg sync.WaitGroup
		start := time.Now()
		for w := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				var local []time.Duration
				for dctx.Err() == nil {
					path := "/session/status"
					if kind == "session" {
						path = "/session/" + busy[rng.IntN(len(busy))] + "/status"
					}
					t0 := time.Now()
					var st map[string]any
					if _, err := r.call(dctx, "GET", path, nil, &st); err != nil {
						if dctx.Err() == nil {
							errs.Add(1)
						}
						continue
					}
					if kind == "session" && st["type"] == "idle" {
						errs.Add(1) // a busy session must never read idle
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			})
		}
		wg.Wait()
		cancel()
		el := time.Since(start)
		res.Latency[kind] = summarize(lat)
		res.Figures[kind+"_reads_per_s"] = float64(len(lat)) / el.Seconds()
		res.Errors += errs.Load()
	}
	return res, nil
}

// fanout: subscribers on /event while producers run reply: turns; events
// delivered per second and the lag from a prompt's acceptance to each
// subscriber seeing its user message. On a cluster the subscribers and the
// producers are spread over the nodes, and the lag of a subscriber on
// another node than the producer's is reported on its own.
func (r *runner) fanout(ctx context.Context) (Result, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type post struct {
		at   time.Time
		node string
	}
	var sent sync.Map // messageID → post
	var mu sync.Mutex
	var lag, cross []time.Duration
	var delivered atomic.Int64
	for i := range r.o.Subscribers {
		node := r.nodes[i%len(r.nodes)]
		err := r.subscribeAt(sctx, node, func(ev sseEvent) {
			delivered.Add(1)
			if ev.Type != core.EventMessageUpdated {
				return
			}
			var p struct {
				Info struct {
					ID   string `json:"id"`
					Role string `json:"role"`
				} `json:"info"`
			}
			if json.Unmarshal(ev.Properties, &p) != nil || p.Info.Role != "user" {
				return
			}
			if v, ok := sent.Load(p.Info.ID); ok {
				ps := v.(post)
				d := time.Since(ps.at)
				mu.Lock()
				if ps.node == node {
					lag = append(lag, d)
				} else {
					cross = append(cross, d)
				}
				mu.Unlock()
			}
		})
		if err != nil {
			return Result{}, err
		}
	}
	pctx, pcancel := context.WithTimeout(ctx, r.o.Duration)
	defer pcancel()
	start := time.Now()
	var prompts, errs atomic.Int64
	var wg sync.WaitGroup
	for j := range r.o.Producers {
		node := r.nodes[j%len(r.nodes)]
		wg.Go(func() {
			var s struct {
				ID string `json:"id"`
			}
			if _, err := r.callAt(ctx, node, "POST", "/session", map[string]any{"title": "bench"}, &s); err != nil {
				errs.Add(1)
				return
			}
			for pctx.Err() == nil {
				id := core.NewID(core.PrefixMessage, false)
				sent.Store(id, post{time.Now(), node})
				if _, err := r.callAt(pctx, node, "POST", "/session/"+s.ID+"/message", r.prompt("reply:a few words of streamed text", id), nil); err != nil {
					if pctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				prompts.Add(1)
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	// Let the subscribers drain.
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	lats := map[string]Latency{"delivery_lag": summarize(lag)}
	if len(r.nodes) > 1 {
		lats["delivery_lag_same_node"] = lats["delivery_lag"]
		lats["delivery_lag_cross_node"] = summarize(cross)
		lats["delivery_lag"] = summarize(append(lag, cross...))
	}
	mu.Unlock()
	return Result{Scenario: "fanout", Errors: errs.Load(), Latency: lats,
		Figures: map[string]float64{"subscribers": float64(r.o.Subscribers), "producers": float64(r.o.Producers),
			"prompts": float64(prompts.Load()), "events_delivered_per_s": float64(delivered.Load()) / el.Seconds()}}, nil
}

// toolTurn runs one turn of session sid and returns once it has ended:
// through the blocking prompt route, or, with ends, through prompt_async
// and the turn's session.idle on the shared event stream.
func (r *runner) toolTurn(ctx context.Context, sid, prompt string, ends *turnEnds) error {
	if ends == nil {
		var m struct {
			Info map[string]any `json:"info"`
		}
		if _, err := r.call(ctx, "POST", "/session/"+sid+"/message", r.prompt(prompt, ""), &m); err != nil {
			return err
		}
		if m.Info["error"] != nil {
			return fmt.Errorf("turn of %s failed: %v", sid, m.Info["error"])
		}
		return nil
	}
	done := ends.expect(sid)
	defer ends.forget(sid)
	if _, err := r.call(ctx, "POST", "/session/"+sid+"/prompt_async", r.prompt(prompt, ""), nil); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("turn of %s: no session.idle: %w", sid, errTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchTurnEnds follows the server's event stream for the ends of turns
// posted with prompt_async (none when !async, for blocking turns); stop
// closes the stream.
func (r *runner) watchTurnEnds(ctx context.Context, async bool) (*turnEnds, func(), error) {
	if !async {
		return nil, func() {}, nil
	}
	ends := &turnEnds{waiting: map[string]chan error{}}
	sctx, cancel := context.WithCancel(ctx)
	if err := r.subscribe(sctx, ends.observe); err != nil {
		cancel()
		return nil, nil, err
	}
	return ends, cancel, nil
}

// turnEnds hands each waiting session the end of its turn, read from one
// event stream shared by every session: session.idle ends a turn, and a
// session.error before it makes that turn a failure.
type turnEnds struct {
	mu      sync.Mutex
	waiting map[string]chan error
	failed  map[string]error
}

func (t *turnEnds) expect(sid string) <-chan error {
	ch := make(chan error, 1)
	t.mu.Lock()
	t.waiting[sid] = ch
	t.mu.Unlock()
	return ch
}

func (t *turnEnds) forget(sid string) {
	t.mu.Lock()
	delete(t.waiting, sid)
	delete(t.failed, sid)
	t.mu.Unlock()
}

func (t *turnEnds) observe(ev sseEvent) {
	if ev.Type != core.EventSessionIdle && ev.Type != core.EventSessionError {
		return
	}
	sid := sessionOf(ev.Properties)
	t.mu.Lock()
	defer t.mu.Unlock()
	ch, ok := t.waiting[sid]
	if !ok {
		return
	}
	if ev.Type == core.EventSessionError {
		if t.failed == nil {
			t.failed = map[string]error{}
		}
		t.failed[sid] = fmt.Errorf("turn of %s failed: %s", sid, ev.Properties)
		return
	}
	select {
	case ch <- t.failed[sid]:
	default:
	}
}
