package engine

import (
	"context"
	"slices"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/modelview"
)

// The model's view of a transcript is package modelview's; what is here
// is the runner's use of it: a step's history, built from the session's
// cached view of earlier runs and the run's own kept messages.

// history turns the session's transcript into the model's conversation and
// returns the id of the user message the next step answers.
//
// Messages before the run's first user message cannot change while the run
// executes (but by this run's own compaction, which drops r.prefix), so
// they are read and converted once. The run's own part is read at its
// first step and then kept current from the run's own writes (own.go), so
// a step reads only the positions of the messages added since. A
// compaction drops the kept part with the prefix.
func (r *runner) history(ctx context.Context) ([]llm.Message, string, error) {
	kept, err := r.transcript(ctx)
	if err != nil {
		return nil, "", err
	}
	msgs, err := r.withoutQueued(ctx, kept)
	if err != nil {
		return nil, "", err
	}
	var out []llm.Message
	var parent string
	if c := modelview.Latest(msgs); c != nil {
		// Compacted during this run: the summary replaces the prefix.
		out, parent = modelview.ComposeAfter(c, r.run.ID, msgs, nil)
	} else {
		if r.prefix == nil {
			var at int64 // the run's first message's position, when read
			if len(kept) > 0 && kept[0].Info.ID == r.run.UserMessageID {
				at = kept[0].Info.Seq
			}
			prefix, err := r.e.history.PrefixAt(ctx, r.e.st, r.run, at)
			if err != nil {
				return nil, "", err
			}
			if r.e.cfg.CheckHistory {
				if err := r.checkPrefix(ctx, prefix); err != nil {
					return nil, "", err
				}
			}
			if prefix == nil {
				// Nothing before the run (a session's first prompt): nil
				// means "not read yet", and every step read it again.
				prefix = []llm.Message{}
			}
			r.prefix = prefix
		}
		out, parent = modelview.Convert(r.run.ID, msgs, append([]llm.Message(nil), r.prefix...))
	}
	if parent == "" {
		parent = r.run.UserMessageID
	}
	return out, parent, nil
}

// withoutQueued leaves out of the run's part of the transcript the prompts
// queued for runs after it: they are those runs' to answer (the model
// would answer them here, and again there). An earlier run's messages
// stay (a run queued behind another starts with that run's last steps
// after its prompt), as do messages added without a run (no reply asked).
// msgs is not changed: the session's cache keeps them all, in place, for
// the runs that come after both. Only when a message of another run is
// there are the session's active runs read: those are the queued ones.
func (r *runner) withoutQueued(ctx context.Context, msgs []core.MessageWithParts) ([]core.MessageWithParts, error) {
	other := func(m core.MessageWithParts) bool { return m.Info.RunID != "" && m.Info.RunID != r.run.ID }
	if !slices.ContainsFunc(msgs, other) {
		return msgs, nil
	}
	active, err := r.e.st.ActiveRuns(ctx, r.run.SessionID)
	if err != nil {
		return nil, err
	}
	queued := map[string]bool{}
	for _, a := range active {
		queued[a.ID] = a.ID != r.run.ID
	}
	out := make([]core.MessageWithParts, 0, len(msgs))
	for _, m := range msgs {
		if !queued[m.Info.RunID] {
			out = append(out, m)
		}
	}
	return out, nil
}

// keepHistory hands the session's cache the view of the whole session
// through the run's last message, once the run has ended (only a run that
// succeeded is kept; an aborted or failed one closes parts it left open):
// r.own brought up to date with the run's last writes (own.go), which an
// ended run no longer changes. The session's next run then reads only its
// own messages, instead of the previous turn again.
func (r *runner) keepHistory(ctx context.Context) {
	if r.prefix == nil || modelview.Latest(r.own) != nil {
		return
	}
	if ok, err := r.settleOwn(ctx); !ok || err != nil || len(r.own) == 0 || modelview.Latest(r.own) != nil {
		return
	}
	kept := r.own
	out, _ := modelview.Convert(r.run.ID, kept, append(make([]llm.Message, 0, len(r.prefix)+2*len(kept)), r.prefix...))
	last := kept[len(kept)-1].Info
	r.e.history.Keep(r.run.SessionID, last.ID, last.Seq, out)
}
