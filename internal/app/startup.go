package app

import (
	"log/slog"
	"sync"

	"github.com/agentd/agentd/internal/tool/builtin"
)

// sweepTools ends, in the background, the tool processes a previous
// process on this database left behind (builtin.Sweep reads every
// process's environment: milliseconds on a busy machine, a third of a
// restart) while the rest of start-up goes on. The returned function waits
// for it; Start calls it before recovery resumes any run, and before it
// gives the database's lock back on a failure, so that a sweep never
// outlives this process's hold on the database.
func sweepTools(scope string, log *slog.Logger) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if n := sweep(scope); n > 0 {
			log.Warn("killed tool processes left by a previous process", "count", n)
		}
	})
	return wg.Wait
}

// sweep is builtin.Sweep; a test slows it down to see Start wait for it.
var sweep = builtin.Sweep
