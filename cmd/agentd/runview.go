package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
)

// printer turns a session's event stream into what agentd run shows: the
// answer on stdout, the rest on stderr; or, with --format json, one JSON
// object per line in the shapes of opencode's run (text, reasoning,
// tool_use, step_start, step_finish, error) plus agentd's (retry,
// permission_asked, question_asked, run_finished).
type printer struct {
	sessionID string
	messageID string // the prompt's: its parts are not printed
	json      bool
	stdout    io.Writer
	stderr    io.Writer
	dimmed    bool // reasoning in faint type: stderr is a terminal

	connected chan struct{}
	result    chan core.Run
	over      chan struct{} // closed when the run has ended
	asks      chan core.PermissionRequest
	questions chan core.QuestionRequest

	head      int64                    // the log's head when the stream first opened
	family    map[string]bool          // the session and its subagents' sessions
	kinds     map[string]core.PartType // part id → type
	printed   map[string]int           // part id → bytes printed
	done      map[string]bool          // part id → its final text seen
	tools     map[string]string        // part id → last status shown
	emitted   map[string]bool          // part id → sent as JSON
	lastOut   byte                     // the last byte written to stdout
	reasoning string                   // the reasoning part being streamed
	retrying  bool                     // the spinner counts down to a retry
	spin      *spinner

	// The run answering the prompt is known once the prompt is admitted;
	// its end may be seen on the stream before that, so it is kept.
	mu     sync.Mutex
	runID  string
	ended  map[string]core.Run
	sent   bool
	isConn bool
}

func newPrinter(sessionID, messageID string, asJSON bool) *printer {
	return &printer{sessionID: sessionID, messageID: messageID, json: asJSON, stdout: os.Stdout, stderr: os.Stderr,
		dimmed: isTerminal(os.Stderr), connected: make(chan struct{}), result: make(chan core.Run, 1), over: make(chan struct{}),
		asks: make(chan core.PermissionRequest, 16), questions: make(chan core.QuestionRequest, 16),
		family: map[string]bool{sessionID: true}, kinds: map[string]core.PartType{}, printed: map[string]int{}, done: map[string]bool{}, tools: map[string]string{}, emitted: map[string]bool{},
		lastOut: '\n', spin: newSpinner(), ended: map[string]core.Run{}}
}

func (p *printer) isConnected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isConn
}

// setRun names the run to follow and reports its end if it was seen.
func (p *printer) setRun(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runID = id
	if run, ok := p.ended[id]; ok {
		p.report(run)
	}
}

// report hands the run's end to the command once; p.mu is held.
func (p *printer) report(run core.Run) {
	if p.sent {
		return
	}
	p.sent = true
	p.spin.stop()
	p.result <- run
	close(p.over)
}

// pause stops the spinner while the user is asked something.
func (p *printer) pause() { p.spin.stop() }

// emit writes one JSON line of --format json.
func (p *printer) emit(typ string, fields map[string]any) {
	// type, timestamp and sessionID first, as opencode writes them.
	head, _ := json.Marshal(struct {
		Type      string `json:"type"`
		Timestamp int64  `json:"timestamp"`
		SessionID string `json:"sessionID"`
	}{typ, time.Now().UnixMilli(), p.sessionID})
	rest, _ := json.Marshal(fields)
	fmt.Fprintf(p.stdout, "%s,%s\n", head[:len(head)-1], rest[1:])
}

func (p *printer) handle(ev client.Event) error {
	switch ev.Type {
	case core.EventServerConnected:
		p.mu.Lock()
		if !p.isConn {
			p.isConn = true
			p.head = ev.Head
			close(p.connected)
		}
		p.mu.Unlock()
		return nil
	}
	if ev.Seq != 0 && ev.Seq <= p.head {
		// Replayed from before the prompt: an earlier run's.
		return nil
	}
	switch ev.Type {
	case core.EventRunUpdated:
		var v core.RunProps
		if json.Unmarshal(ev.Properties, &v) != nil || !core.TerminalState(v.Run.State) {
			return nil
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ended[v.Run.ID] = v.Run
		if v.Run.ID == p.runID {
			p.report(v.Run)
		}
	case core.EventSessionCreated:
		// A subagent's session: its permission asks are the user's too.
		var v struct {
			Info core.Session `json:"info"`
		}
		if json.Unmarshal(ev.Properties, &v) == nil && p.family[v.Info.ParentID] {
			p.family[v.Info.ID] = true
		}
	case core.EventPartDelta:
		var d core.DeltaProps
		if json.Unmarshal(ev.Properties, &d) == nil && d.SessionID == p.sessionID && d.Field == "text" && !p.json && !p.done[d.PartID] {
			p.text(d.PartID, p.kinds[d.PartID], d.Delta)
		}
	case core.EventPartUpdated:
		var v struct {
			Part core.Part `json:"part"`
		}
		if json.Unmarshal(ev.Properties, &v) != nil || v.Part.SessionID != p.sessionID || v.Part.MessageID == p.messageID {
			return nil
		}
		p.part(v.Part)
	case core.EventSessionStatus:
		var v struct {
			SessionID string             `json:"sessionID"`
			Status    core.SessionStatus `json:"status"`
		}
		if json.Unmarshal(ev.Properties, &v) == nil && v.SessionID == p.sessionID {
			p.status(v.Status)
		}
	case core.EventPermissionAsked:
		var req core.PermissionRequest
		if json.Unmarshal(ev.Properties, &req) == nil && p.family[req.SessionID] {
			if p.json {
				p.emit("permission_asked", map[string]any{"permission": req})
			}
			p.asks <- req
		}
	case core.EventQuestionAsked:
		var q core.QuestionRequest
		if json.Unmarshal(ev.Properties, &q) == nil && p.family[q.SessionID] {
			if p.json {
				p.emit("question_asked", map[string]any{"question": q.Opencode()})
			}
			p.questions <- q
		}
	case core.EventSessionError:
		if p.json {
			var v struct {
				SessionID string          `json:"sessionID"`
				Error     json.RawMessage `json:"error"`
			}
			if json.Unmarshal(ev.Properties, &v) == nil && v.SessionID == p.sessionID {
				p.emit("error", map[string]any{"error": v.Error})
			}
		}
	}
	return nil
}

// text prints streamed text: the answer on stdout, reasoning on stderr
// (faint on a terminal), never glued to each other.
func (p *printer) text(partID string, kind core.PartType, s string) {
	if s == "" {
		return
	}
	p.printed[partID] += len(s)
	if kind == core.PartReasoning {
		if p.reasoning != partID {
			p.endLine()
			p.reasoning = partID
			fmt.Fprint(p.stderr, p.faint("thinking: "))
		}
		fmt.Fprint(p.stderr, p.faint(s))
		return
	}
	p.endReasoning()
	fmt.Fprint(p.stdout, s)
	p.lastOut = s[len(s)-1]
}

func (p *printer) faint(s string) string {
	if p.dimmed {
		return "\033[2m" + s + "\033[0m"
	}
	return s
}

// endReasoning ends the reasoning line on stderr before anything else is
// printed.
func (p *printer) endReasoning() {
	if p.reasoning != "" {
		fmt.Fprintln(p.stderr)
		p.reasoning = ""
	}
}

// endLine ends the answer's line on stdout before stderr speaks, so that
// the two streams do not share a line on a terminal.
func (p *printer) endLine() {
	if p.lastOut != '\n' {
		fmt.Fprintln(p.stdout)
		p.lastOut = '\n'
	}
}

func (p *printer) part(pt core.Part) {
	kind := pt.Type
	if kind == core.PartText && pt.Metadata != nil {
		if _, idle := pt.Metadata["agentd"]; idle && pt.Text == "" {
			return // the run's outcome marker: run_finished says it
		}
	}
	p.kinds[pt.ID] = kind
	if p.json {
		p.emitPart(pt)
		return
	}
	switch kind {
	case core.PartText, core.PartReasoning:
		// What the live deltas did not bring (they may be dropped).
		if n := p.printed[pt.ID]; n < len(pt.Text) {
			p.text(pt.ID, kind, pt.Text[n:])
		}
		// A delta arriving after the final text (from a server that does
		// not keep their order) would print it twice.
		p.done[pt.ID] = pt.Time.End != 0
		if kind == core.PartReasoning && pt.Time.End != 0 && p.reasoning == pt.ID {
			p.endReasoning()
		}
	case core.PartTool:
		st := pt.State.Status
		if p.tools[pt.ID] == st {
			return
		}
		p.tools[pt.ID] = st
		switch st {
		case core.ToolRunning:
			p.endReasoning()
			p.endLine()
			fmt.Fprintf(p.stderr, "⚙ %s %s\n", pt.Tool, compact(pt.State.Input))
			p.spin.start(pt.Tool)
		case core.ToolCompleted:
			p.spin.stop()
			fmt.Fprintf(p.stderr, "✓ %s\n", pt.Tool)
		case core.ToolError:
			p.spin.stop()
			fmt.Fprintf(p.stderr, "✗ %s: %s\n", pt.Tool, pt.State.Error)
		}
	}
}

// emitPart writes a finished part as opencode's run does: text and
// reasoning once ended, a tool call once it completed or failed, and
// step boundaries.
func (p *printer) emitPart(pt core.Part) {
	if p.emitted[pt.ID] {
		return
	}
	var typ string
	switch pt.Type {
	case core.PartText:
		if pt.Time.End != 0 {
			typ = "text"
		}
	case core.PartReasoning:
		if pt.Time.End != 0 {
			typ = "reasoning"
		}
	case core.PartTool:
		if st := pt.State.Status; st == core.ToolCompleted || st == core.ToolError {
			typ = "tool_use"
		}
	case core.PartStepStart:
		typ = "step_start"
	case core.PartStepFinish:
		typ = "step_finish"
	}
	if typ == "" {
		return
	}
	p.emitted[pt.ID] = true
	p.emit(typ, map[string]any{"part": pt})
}

// status shows a retry with its countdown (a line per retry when stderr
// is not a terminal).
func (p *printer) status(st core.SessionStatus) {
	if st.Type != core.StatusRetry {
		if p.retrying {
			p.retrying = false
			p.spin.stop()
		}
		return
	}
	if p.json {
		p.emit("retry", map[string]any{"attempt": st.Attempt, "message": st.Message, "next": st.Next})
		return
	}
	p.endReasoning()
	p.endLine()
	next := time.UnixMilli(st.Next)
	label := func() string {
		return fmt.Sprintf("↻ retry %d in %s: %s", st.Attempt, max(0, time.Until(next)).Round(time.Second), st.Message)
	}
	if !p.spin.tty {
		fmt.Fprintln(p.stderr, label())
		return
	}
	p.retrying = true
	p.spin.startFunc(label)
}

// finish ends the output: a last newline for the answer, and how the run
// ended unless it succeeded.
func (p *printer) finish(run core.Run) {
	p.spin.stop()
	if p.json {
		p.emit("run_finished", map[string]any{"run": run})
		return
	}
	p.endReasoning()
	p.endLine()
	if run.State != core.RunSucceeded {
		msg := ""
		if run.Error != nil {
			msg = ": " + run.Error.Data.Message
		}
		fmt.Fprintf(p.stderr, "run %s %s (%s)%s\n", run.ID, run.State, run.Reason, msg)
	}
}

func compact(b json.RawMessage) string {
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// spinner shows, on a terminal only, that something is under way: a tool
// running, or a retry counting down.
type spinner struct {
	tty   bool
	mu    sync.Mutex
	stopc chan struct{}
	done  chan struct{}
}

func newSpinner() *spinner {
	return &spinner{tty: isTerminal(os.Stderr)}
}

func (s *spinner) start(label string) { s.startFunc(func() string { return label }) }

func (s *spinner) startFunc(label func() string) {
	if !s.tty {
		return
	}
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopc, s.done = make(chan struct{}), make(chan struct{})
	stopc, done := s.stopc, s.done
	go func() {
		defer close(done)
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(os.Stderr, "\r\033[K%c %s", frames[i%len(frames)], label())
			select {
			case <-stopc:
				fmt.Fprint(os.Stderr, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
}

func (s *spinner) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopc != nil {
		close(s.stopc)
		<-s.done
		s.stopc, s.done = nil, nil
	}
}
