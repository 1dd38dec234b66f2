package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkConfinedTrue starts bash -c true, unconfined and confined, in
// the same run. The trampoline is this test binary; with AGENTD_BIN naming
// a built agentd, a third case starts that one instead, as a server does.
func BenchmarkConfinedTrue(b *testing.B) {
	if ABI() == 0 {
		b.Skip("no Landlock")
	}
	ws := b.TempDir()
	s, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		s    *Sandbox
		exe  string
	}{{"unconfined", nil, ""}, {"confined", s, ""}}
	if bin := os.Getenv("AGENTD_BIN"); bin != "" {
		cases = append(cases, struct {
			name string
			s    *Sandbox
			exe  string
		}{"confined-agentd", s, bin})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				cmd := exec.Command("bash", "-c", "true")
				cmd.Dir = ws
				release, err := c.s.Wrap(cmd, Spec{Dir: ws})
				if err != nil {
					b.Fatal(err)
				}
				if c.exe != "" {
					cmd.Path = c.exe
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				release()
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100])/1e6, "p99-ms")
		})
	}
}
