package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/webhook"
)

// BenchmarkWebhookRunEnd is one warm single-step turn through the HTTP
// API, as BenchmarkTurn, followed (hooks) by the wait for its run.ended at
// a receiver on this machine, or not (off). It reports the delivery's
// latency after the run's end (from the run's end time, in milliseconds,
// to the receiver's receipt; p50 and p99), the CPU the process spent per
// turn (server and receiver together) and the commits (fsyncs) per turn:
// what webhooks cost per run end is the difference between the two.
func BenchmarkWebhookRunEnd(b *testing.B) {
	for _, hooks := range []bool{false, true} {
		name := "off"
		if hooks {
			name = "hooks"
		}
		b.Run(name, func(b *testing.B) { benchWebhook(b, hooks) })
	}
}

func benchWebhook(b *testing.B, hooks bool) {
	got := make(chan time.Duration, 1)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var env webhook.Envelope
		var d webhook.RunEnded
		if json.Unmarshal(body, &env) == nil && json.Unmarshal(env.Data, &d) == nil {
			got <- at.Sub(time.UnixMilli(d.Run.Time.Ended))
		}
	}))
	defer rcv.Close()
	cfg := app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1", Version: "bench", Directory: b.TempDir(),
		Logger: quietLogger(), Heartbeat: time.Hour}
	cfg.Webhooks = webhook.Config{Secret: "bench-secret-0123456789", Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	a, err := app.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := client.New(a.URL())
	s, _ := c.CreateSession(context.Background(), "", "")
	if hooks {
		resp, err := http.Post(a.URL()+"/webhook", "application/json", strings.NewReader(`{"url":"`+rcv.URL+`"}`))
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("subscribe: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	turn := func() time.Duration {
		if _, err := c.Send(context.Background(), s.ID, client.Prompt{Text: "reply:hi"}); err != nil {
			b.Fatal(err)
		}
		if !hooks {
			return 0
		}
		select {
		case d := <-got:
			return d
		case <-time.After(30 * time.Second):
			b.Fatal("no webhook")
		}
		return 0
	}
	turn()
	before := commits(b, a.URL())
	cpu0 := cpuTime()
	var lat []time.Duration
	for b.Loop() {
		lat = append(lat, turn())
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/turn")
	b.ReportMetric((commits(b, a.URL())-before)/float64(b.N), "fsyncs/turn")
	if hooks {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// cpuTime is the CPU the process has spent (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
