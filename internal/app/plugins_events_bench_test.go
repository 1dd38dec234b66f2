package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/plugin"
)

// BenchmarkPluginStreamEvents is a streamed answer of 200 words (200
// deltas, each a live message.part.delta) through the HTTP API: without
// plugins, with a plugin host whose plugin has no event hook, and with a
// plugin whose event hook gets every event (counting them): the CPU an
// answer costs the server and the host.
func BenchmarkPluginStreamEvents(b *testing.B) {
	for _, mode := range []string{"none", "no-listener", "listening"} {
		b.Run(mode, func(b *testing.B) {
			cfg := app.Config{DBPath: filepath.Join(b.TempDir(), "a.db"), Host: "127.0.0.1", Version: "bench",
				Directory: b.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour, Tools: testTools(nil)}
			switch mode {
			case "no-listener":
				cfg.Plugins.Specs, cfg.Plugins.Dir = pluginSpecs(b, "twohooks.js")
			case "listening":
				cfg.Plugins.Specs, cfg.Plugins.Dir = pluginSpecs(b, "countevents.js")
			}
			a, err := app.Start(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer a.Stop(context.Background())
			c := client.New(a.URL())
			s, _ := c.CreateSession(context.Background(), "", "")
			prompt := client.Prompt{Text: "reply:" + strings.TrimSpace(strings.Repeat("word ", 200))}
			if _, err := c.Send(context.Background(), s.ID, prompt); err != nil { // warm: the instance is made
				b.Fatal(err)
			}
			pid := 0
			if h := a.PluginHost(); h != nil {
				pid = h.Pid()
			}
			cpu0, host0 := selfCPU(), procCPU(pid)
			for b.Loop() {
				if _, err := c.Send(context.Background(), s.ID, prompt); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(selfCPU()-cpu0)/n/1e6, "server-cpu-ms/answer")
			b.ReportMetric(float64(procCPU(pid)-host0)/n/1e6, "host-cpu-ms/answer")
			if h := a.PluginHost(); h != nil && h.EventsDropped() > 0 {
				b.ReportMetric(float64(h.EventsDropped()), "dropped")
			}
		})
	}
}

func pluginSpecs(b *testing.B, file string) (specs []plugin.Spec, dir string) {
	dir, specs = pluginFolder(b, file)
	return specs, dir
}
