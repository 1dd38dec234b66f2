package app

import (
	"log/slog"
	"os"
	"sync"

	"github.com/agentd/agentd/internal/tool/builtin"
)

// toolHousekeeping is what start-up does for tool processes before any run
// is recovered: ending those a previous process on this database left
// behind (builtin.Sweep reads every process's environment: milliseconds
// on a busy machine) and starting the reaper (a fork and exec). Both run
// in the background while the rest of start-up goes on; Start waits for
// them before recovery may resume a run, and before it gives the
// database's lock back on a failure, so that neither outlives this
// process's hold on the database.
type toolHousekeeping struct {
	wg     sync.WaitGroup
	reaper *builtin.Reaper
	err    error
}

func startToolHousekeeping(scope string, keep []*os.File, log *slog.Logger) *toolHousekeeping {
	h := &toolHousekeeping{}
	h.wg.Go(func() {
		if n := sweep(scope); n > 0 {
			log.Warn("killed tool processes left by a previous process", "count", n)
		}
		h.reaper, h.err = builtin.StartReaper(scope, keep...)
	})
	return h
}

// wait returns the reaper once the sweep is done and the reaper started.
func (h *toolHousekeeping) wait() (*builtin.Reaper, error) {
	h.wg.Wait()
	return h.reaper, h.err
}

// stop waits for the housekeeping and stops the reaper it started; for
// start-up's failures.
func (h *toolHousekeeping) stop() {
	if r, err := h.wait(); err == nil {
		_ = r.Stop()
	}
}

// sweep is builtin.Sweep; a test slows it down to see Start wait for it.
var sweep = builtin.Sweep
