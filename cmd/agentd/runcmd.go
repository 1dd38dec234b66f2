package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// cmdRun sends one prompt and streams the answer: text to stdout, tool
// activity to stderr. Ctrl-C aborts the run. Without --url it runs an
// embedded server on the default database.
func cmdRun(ctx context.Context, stopSignals context.CancelFunc, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	url := fs.String("url", os.Getenv("AGENTD_URL"), "server URL (empty: embedded server)")
	db := fs.String("db", "", "database of the embedded server (default: a temporary one, removed afterwards)")
	sessionID := fs.String("session", "", "continue this session (default: a new one)")
	model := fs.String("model", "", "provider/model to use")
	busy := fs.String("busy", "", "busy policy: steer, queue, reject, interrupt")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, `usage: agentd run [--url URL] [--session ID] [--model P/M] "prompt"`)
		return exitError{2}
	}
	prompt := strings.Join(fs.Args(), " ")
	base := *url
	if base == "" {
		wd, _ := os.Getwd()
		dbPath := *db
		if dbPath == "" {
			// Never the server's database: two processes on one database
			// would both recover its runs.
			tmp, err := os.MkdirTemp("", "agentd-run-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dbPath = filepath.Join(tmp, "agentd.db")
		}
		a, err := app.Start(context.WithoutCancel(ctx), app.Config{DBPath: dbPath, Host: "127.0.0.1", Port: 0,
			Version: version, Directory: wd, Security: serverSecurityLoopback(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return err
		}
		defer a.Stop(context.Background())
		base = a.URL()
	}
	c := newClient(base)
	// Detach from the signal context: the first Ctrl-C aborts the run and
	// we still want to see it end.
	work := context.WithoutCancel(ctx)
	sid := *sessionID
	if sid == "" {
		s, err := c.CreateSession(work, "", "")
		if err != nil {
			return err
		}
		sid = s.ID
	}
	p := client.Prompt{Text: prompt, MessageID: core.NewID(core.PrefixMessage, false), Busy: *busy}
	if *model != "" {
		prov, mod, ok := strings.Cut(*model, "/")
		if !ok {
			return fmt.Errorf("--model: want provider/model, got %q", *model)
		}
		p.Model = &client.ModelRef{ProviderID: prov, ModelID: mod}
	}

	streamCtx, cancelStream := context.WithCancel(work)
	defer cancelStream()
	connected := make(chan struct{})
	result := make(chan core.Run, 1)
	streamErr := make(chan error, 1)
	pr := newPrinter(p.MessageID, connected, result)
	go func() {
		streamErr <- c.Events(streamCtx, sid, 0, false, pr.handle)
	}()
	select {
	case <-connected:
	case err := <-streamErr:
		return fmt.Errorf("subscribe to events: %w", err)
	}
	if err := c.SendAsync(work, sid, p); err != nil {
		return err
	}
	runID, err := c.RunOf(work, sid, p.MessageID)
	if err != nil {
		return err
	}
	pr.setRun(runID)
	aborted := false
	for {
		select {
		case run := <-result:
			fmt.Println()
			if run.Error != nil && run.State != core.RunSucceeded {
				fmt.Fprintf(os.Stderr, "run %s %s (%s): %s\n", run.ID, run.State, run.Reason, run.Error.Data.Message)
			}
			switch run.State {
			case core.RunSucceeded:
				return nil
			case core.RunInterrupted:
				return exitError{130}
			default:
				return exitError{1}
			}
		case err := <-streamErr:
			if err == nil {
				err = errors.New("event stream ended")
			}
			return err
		case <-ctx.Done():
			if aborted {
				continue
			}
			aborted = true
			stopSignals()
			fmt.Fprintln(os.Stderr, "\naborting…")
			if _, err := c.Abort(work, sid); err != nil {
				return err
			}
		}
	}
}

// printer turns a session's event stream into terminal output.
type printer struct {
	messageID string
	connected chan struct{}
	result    chan core.Run
	printed   map[string]int // part id → bytes of text printed
	tools     map[string]string
	spin      *spinner

	// The run answering the prompt is known once the prompt is admitted;
	// its end may be seen on the stream before that, so it is kept.
	mu    sync.Mutex
	runID string
	ended map[string]core.Run
	sent  bool
}

func newPrinter(messageID string, connected chan struct{}, result chan core.Run) *printer {
	return &printer{messageID: messageID, connected: connected, result: result, printed: map[string]int{},
		tools: map[string]string{}, spin: newSpinner(), ended: map[string]core.Run{}}
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
}

func (p *printer) handle(ev client.Event) error {
	switch ev.Type {
	case core.EventServerConnected:
		close(p.connected)
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
	case core.EventPartDelta:
		var d struct {
			MessageID, PartID, Field, Delta string
		}
		if json.Unmarshal(ev.Properties, &d) == nil && d.Field == "text" {
			fmt.Print(d.Delta)
			p.printed[d.PartID] += len(d.Delta)
		}
	case core.EventPartUpdated:
		var v struct {
			Part core.Part `json:"part"`
		}
		if json.Unmarshal(ev.Properties, &v) != nil || v.Part.MessageID == p.messageID {
			return nil
		}
		switch v.Part.Type {
		case core.PartText:
			// Print what the live deltas did not (they may be dropped).
			if n := p.printed[v.Part.ID]; n < len(v.Part.Text) {
				fmt.Print(v.Part.Text[n:])
				p.printed[v.Part.ID] = len(v.Part.Text)
			}
		case core.PartTool:
			st := v.Part.State.Status
			if p.tools[v.Part.ID] == st {
				return nil
			}
			p.tools[v.Part.ID] = st
			switch st {
			case core.ToolRunning:
				fmt.Fprintf(os.Stderr, "⚙ %s %s\n", v.Part.Tool, compact(v.Part.State.Input))
				p.spin.start(v.Part.Tool)
			case core.ToolCompleted:
				p.spin.stop()
				fmt.Fprintf(os.Stderr, "✓ %s\n", v.Part.Tool)
			case core.ToolError:
				p.spin.stop()
				fmt.Fprintf(os.Stderr, "✗ %s: %s\n", v.Part.Tool, v.Part.State.Error)
			}
		}
	}
	return nil
}

func compact(b json.RawMessage) string {
	s := string(b)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// spinner shows that a tool is running, on a terminal only.
type spinner struct {
	tty   bool
	mu    sync.Mutex
	stopc chan struct{}
	done  chan struct{}
}

func newSpinner() *spinner {
	st, err := os.Stderr.Stat()
	return &spinner{tty: err == nil && st.Mode()&os.ModeCharDevice != 0}
}

func (s *spinner) start(label string) {
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
			fmt.Fprintf(os.Stderr, "\r%c %s", frames[i%len(frames)], label)
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
