package bench

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// scrape reads the first node's Prometheus metrics: name (with labels, as
// written) to value. A server without /metrics gives an empty map.
func (r *runner) scrape(ctx context.Context) map[string]float64 {
	m := map[string]float64{}
	req, err := http.NewRequestWithContext(ctx, "GET", r.nodes[0]+"/metrics", nil)
	if err != nil {
		return m
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// serverCost is what the server spent on a scenario, from its metrics:
// group commits (each one fsync), write transactions and CPU time.
type serverCost struct {
	commits, transactions, cpuSeconds, busySeconds float64
	at                                             time.Time
	rssKiB                                         int64
	ok                                             bool
}

func (r *runner) serverCost(ctx context.Context) serverCost {
	m := r.scrape(ctx)
	c, ok := m["agentd_store_commit_batch_size_count"]
	sc := serverCost{commits: c, transactions: m["agentd_store_commit_batch_size_sum"], cpuSeconds: m["process_cpu_seconds_total"],
		busySeconds: m["agentd_store_committer_busy_seconds_total"], at: time.Now(), ok: ok}
	if r.o.PID > 0 {
		sc.rssKiB = rssKiB(r.o.PID)
	}
	return sc
}

// queueSampler samples the writer's queue (agentd_store_tx_waiting)
// while a scenario runs; stop returns its mean and maximum.
func (r *runner) queueSampler(ctx context.Context) (stop func() (mean, peak float64)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var sum, peak float64
	n := 0
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if v, ok := r.scrape(ctx)["agentd_store_tx_waiting"]; ok {
				sum, n, peak = sum+v, n+1, max(peak, v)
			}
		}
	}()
	return func() (float64, float64) {
		cancel()
		<-done
		if n == 0 {
			return 0, 0
		}
		return sum / float64(n), peak
	}
}

// perTurn adds, to figures, what the server spent per turn between two
// readings. Only one node is read, so it is skipped for clusters.
func (r *runner) perTurn(figures map[string]float64, before, after serverCost, turns int) {
	if !before.ok || !after.ok || turns == 0 || len(r.nodes) > 1 {
		return
	}
	n := float64(turns)
	figures["fsyncs_per_turn"] = (after.commits - before.commits) / n
	figures["transactions_per_turn"] = (after.transactions - before.transactions) / n
	figures["server_cpu_ms_per_turn"] = 1000 * (after.cpuSeconds - before.cpuSeconds) / n
	if wall := after.at.Sub(before.at).Seconds(); wall > 0 && after.busySeconds > 0 {
		// The writer's busy share: 100 means the one writer is the bound.
		figures["committer_busy_pct"] = 100 * (after.busySeconds - before.busySeconds) / wall
	}
}
