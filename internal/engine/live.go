package engine

import (
	"time"

	"github.com/agentd/agentd/internal/core"
)

// Live announcements. Streamed text is written at most every flush
// interval, but clients render a part from its first message.part.updated
// and drop deltas of a part they have not seen (opencode's clients do),
// and show a bash call's output from its running state. These updates are
// published live (no seq): the durable ones follow, with the same ids, and
// a client that replays the log gets those.

// announce publishes a streamed part, empty, before its first delta, and
// the step's message before its first part.
func (r *runner) announce(p core.Part) {
	s := r.step
	if !s.announced {
		s.announced = true
		r.e.hub.PublishLive(core.MustEvent(s.msg.SessionID, core.EventMessageUpdated,
			core.MessageProps{SessionID: s.msg.SessionID, Info: s.msg}))
	}
	r.e.hub.PublishLive(core.MustEvent(p.SessionID, core.EventPartUpdated,
		core.PartProps{SessionID: p.SessionID, Part: p, Time: time.Now().UnixMilli()}))
}

// progress publishes what a running tool call shows meanwhile (bash: its
// output so far) as live part updates: the durable one comes with the
// call's end.
func (r *runner) progress(running core.Part) func(map[string]any) {
	return func(md map[string]any) {
		p := running
		p.State.Metadata = md
		r.e.hub.PublishLive(core.MustEvent(p.SessionID, core.EventPartUpdated,
			core.PartProps{SessionID: p.SessionID, Part: p, Time: time.Now().UnixMilli()}))
	}
}
