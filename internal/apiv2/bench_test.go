package apiv2_test

import (
	"testing"
)

// BenchmarkHistory reads a session's whole history in opencode 2's shape:
// the log's events translated (store reads for prompts included) and
// encoded. A session of 20 runs, each a reasoning, a tool call and a
// reply.
func BenchmarkHistory(b *testing.B) {
	n := startNode(b)
	sid := n.session()
	for range 20 {
		n.prompt(sid, "reasoning:thinking\n"+`tool:bash:{"command":"echo hi"}`+"\nreply:done")
		n.wait(sid)
	}
	events := len(n.history(sid))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n.must(200, "GET", "/api/session/"+sid+"/history", nil)
	}
	b.ReportMetric(float64(events), "events/op")
}
