package app_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/store"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkTurn is one warm single-step turn through the HTTP API: POST
// /session/{id}/message with a reply: prompt, until the run has ended
// (the response is written after the idle events are committed).
func BenchmarkTurn(b *testing.B) { benchTurn(b, nil) }

func benchTurn(b *testing.B, tracer trace.Tracer) {
	a, err := app.Start(context.Background(), app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1",
		Version: "bench", Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour, Tracer: tracer})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := client.New(a.URL())
	s, _ := c.CreateSession(context.Background(), "", "")
	c.Send(context.Background(), s.ID, client.Prompt{Text: "reply:warm up"})
	before := commits(b, a.URL())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Send(context.Background(), s.ID, client.Prompt{Text: "reply:hi"}); err != nil {
			b.Fatal(err)
		}
	}
	// Each commit is one fsync (synchronous=FULL, group commit).
	b.ReportMetric((commits(b, a.URL())-before)/float64(b.N), "fsyncs/turn")
}

// BenchmarkRecovery1000 stops a node with 1,000 runs in flight and
// measures the restart until every run has been resumed (its first new
// step has begun).
func BenchmarkRecovery1000(b *testing.B) {
	b.StopTimer()
	for range b.N {
		dir := b.TempDir()
		cfg := app.Config{DBPath: filepath.Join(dir, "a.db"), Host: "127.0.0.1", Version: "bench", Directory: dir,
			Logger: quietLogger(), Heartbeat: time.Hour, SQLiteSynchronous: "NORMAL"}
		cfg.Engine.Resume = true
		cfg.Engine.ShutdownGrace = 30 * time.Second
		a, err := app.Start(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		c := client.New(a.URL())
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for range 1000 {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				s, err := c.CreateSession(context.Background(), "", "")
				if err == nil {
					err = c.SendAsync(context.Background(), s.ID, client.Prompt{Text: "sleep:600"})
				}
				if err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		waitAll(b, a.Store, func(r core.Run) bool { return r.Steps >= 1 })
		a.Stop(context.Background())
		// Set-up ran with synchronous=NORMAL to be quick; the measured
		// restart uses the default, FULL.
		cfg.SQLiteSynchronous = ""
		b.StartTimer()
		start := time.Now()
		a, err = app.Start(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		recovered := time.Since(start)
		waitAll(b, a.Store, func(r core.Run) bool { return r.Phase == "" && r.Steps >= 2 })
		b.StopTimer()
		b.ReportMetric(float64(recovered.Milliseconds()), "ms-to-listen")
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-all-resumed")
		a.Stop(context.Background())
	}
}

func waitAll(b *testing.B, st store.Store, ok func(core.Run) bool) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		runs, err := st.ActiveRuns(context.Background(), "")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, r := range runs {
			if ok(r) {
				n++
			}
		}
		if n == 1000 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of 1000 runs reached the state", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkConcurrentToolTurns runs 3-step tool conversations in 100
// sessions at once; one op is one turn.
func BenchmarkConcurrentToolTurns(b *testing.B) {
	a, err := app.Start(context.Background(), app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1",
		Version: "bench", Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := client.New(a.URL())
	c.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	const sessions = 100
	sids := make([]string, sessions)
	for i := range sids {
		s, err := c.CreateSession(context.Background(), "", "")
		if err != nil {
			b.Fatal(err)
		}
		sids[i] = s.ID
	}
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, sid := range sids {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Send(context.Background(), sid, client.Prompt{Text: "tool:list:{}\ntool:list:{}\nreply:done"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
}

// BenchmarkTaskTurn is a turn whose one step hands a task to a subagent
// (a child session and run) and then answers: the cost of a subagent
// beside BenchmarkTurn's plain turn.
func BenchmarkTaskTurn(b *testing.B) {
	a, err := app.Start(context.Background(), app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1",
		Version: "bench", Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := client.New(a.URL())
	s, _ := c.CreateSession(context.Background(), "", "")
	prompt := `tool:task:{"description":"d","prompt":"reply:child","subagent_type":"general"}` + "\nreply:done"
	c.Send(context.Background(), s.ID, client.Prompt{Text: prompt})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Send(context.Background(), s.ID, client.Prompt{Text: prompt}); err != nil {
			b.Fatal(err)
		}
	}
}

// discard is a span exporter that drops what it is given: the cost of
// recording spans, without a collector's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTurnTraced is BenchmarkTurn with tracing on (a span for the
// request, the run, its step and its model call, batched).
func BenchmarkTurnTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(context.Background())
	benchTurn(b, tp.Tracer("bench"))
}

// BenchmarkMetricsScrape is one GET /metrics on a node with 1,000
// sessions of which 100 have a run in flight (the scrape reads the active
// runs, the pending permissions and the log's bounds from the store).
func BenchmarkMetricsScrape(b *testing.B) {
	a, err := app.Start(context.Background(), app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1",
		Version: "bench", Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour, SQLiteSynchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := client.New(a.URL())
	for i := range 1000 {
		s, err := c.CreateSession(context.Background(), "", "")
		if err != nil {
			b.Fatal(err)
		}
		text := "reply:done"
		if i < 100 {
			text = "sleep:600"
		}
		if err := c.SendAsync(context.Background(), s.ID, client.Prompt{Text: text}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(a.URL() + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.SetBytes(n)
	}
}
