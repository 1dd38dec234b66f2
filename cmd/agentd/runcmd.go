package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/lockfile"
)

var runHelp = help{
	usage: "run [flags] PROMPT...",
	about: `Sends one prompt and streams the answer: the model's text on stdout; tool calls,
reasoning (dimmed), retries and errors on stderr. When a tool asks for permission it
asks you (once / always / reject). Ctrl-C aborts the run.

Without --url it starts an embedded server on the same database and configuration as
"agentd serve" (agentd.json, provider keys in the environment, --config), so
--continue picks up where the last run in this directory left off. When an "agentd
serve" holds that database, run sends the prompt to it (and says so on stderr). With
--url it talks to a running server, whose configuration decides.`,
	minArgs: 1, maxArgs: -1,
	examples: []string{
		`agentd run "reply:hello"                     # the offline scripted model`,
		`OPENAI_API_KEY=sk-… agentd run --model openai/gpt-4.1 "explain main.go"`,
		`agentd run --continue "and now the tests"    # the last session of this directory`,
		`agentd run --file notes.md "summarize this"`,
		`agentd run --model anthropic/claude-sonnet-4-5 --file shot.png "what is wrong here?"`,
		`agentd run --yes "tool:bash:{\"command\":\"ls\"}"        # allow every permission ask`,
		`agentd run --format json "reply:hi" | jq -r 'select(.type=="text") | .part.text'`,
		`agentd run --url http://127.0.0.1:4096 "sleep:5"           # a running server`,
	},
	env: append([]string{
		"OPENAI_API_KEY, ANTHROPIC_API_KEY   enable openai/<model>, anthropic/<model> (embedded server)",
		"AGENTD_DATABASE_URL      the embedded server's database when --db is not given",
	}, clientEnv...),
	exits: []string{
		"0  the run succeeded",
		"1  the run failed (the reason is printed), or another error",
		"3  a tool asked for permission and no one could answer: not a terminal and no --yes (the request is rejected, which ends the run)",
		"130  the run was interrupted: Ctrl-C, aborted elsewhere, or a permission rejected without a reason",
	},
}

// runFlags are agentd run's settings.
type runFlags struct {
	url, db, config, session, model, agent, busy, format, logLevel string
	cont, yes, printConfig                                         bool
	files                                                          []string
}

// cmdRun sends one prompt and follows its run to the end. Ctrl-C aborts
// the run (a second one ends the process).
func cmdRun(ctx context.Context, stopSignals context.CancelFunc, args []string) error {
	fs := newFlags("run")
	var o runFlags
	fs.StringVar(&o.url, "url", os.Getenv("AGENTD_URL"), "server URL (default $AGENTD_URL; empty: an embedded server)")
	fs.StringVar(&o.db, "db", "", "embedded server: its database (default: serve's, $AGENTD_DATABASE_URL or ~/.local/share/agentd/agentd.db)")
	fs.StringVar(&o.config, "config", "", "embedded server: configuration file read after the user's and the directory's agentd.json")
	fs.StringVar(&o.session, "session", "", "continue this session")
	fs.BoolVar(&o.cont, "continue", false, "continue the most recent session of this directory")
	fs.StringVar(&o.model, "model", "", "provider/model to answer (default: the configuration's)")
	fs.StringVar(&o.agent, "agent", "", "agent to answer (default build)")
	fs.Func("file", "attach a file to the prompt: text, a picture, a PDF or a directory (repeatable)", func(s string) error { o.files = append(o.files, s); return nil })
	fs.StringVar(&o.busy, "busy", "", "if the session is busy: steer, queue, reject or interrupt")
	fs.StringVar(&o.format, "format", "default", "output: default (text), or json (one event per line, opencode's run shapes)")
	fs.BoolVar(&o.yes, "yes", false, "allow every permission ask (once each) without asking")
	fs.BoolVar(&o.yes, "auto", false, "the same as --yes")
	fs.StringVar(&o.logLevel, "log-level", "error", "embedded server: what of its log to show on stderr")
	fs.BoolVar(&o.printConfig, "print-config", false, "print the embedded server's merged configuration and exit")
	pos, err := parse(fs, runHelp, args)
	if o.printConfig && err != nil {
		// --print-config needs no prompt.
		var ee exitError
		if errors.As(err, &ee) && ee.code == 2 && len(args) > 0 {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	if o.format != "default" && o.format != "json" {
		return usageError(fs, fmt.Sprintf("--format %q: want default or json", o.format))
	}
	if o.cont && o.session != "" {
		return usageError(fs, "--continue and --session exclude each other")
	}
	if o.url != "" && (o.config != "" || o.db != "" || o.printConfig) {
		return usageError(fs, "--config, --db and --print-config set up the embedded server; with --url the server's own configuration decides")
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	setup := app.Setup{Workspace: wd, ConfigFile: o.config, GlobalDir: app.DefaultGlobalDir()}
	if o.printConfig {
		return printMergedConfig(setup)
	}
	prompt := client.Prompt{Text: strings.Join(pos, " "), MessageID: core.NewID(core.PrefixMessage, false),
		Busy: o.busy, Agent: o.agent}
	if o.model != "" {
		ref, err := config.ParseModel(o.model)
		if err != nil {
			return usageError(fs, "--"+err.Error())
		}
		prompt.Model = &client.ModelRef{ProviderID: ref.ProviderID, ModelID: ref.ModelID}
	}
	for _, f := range o.files {
		part, err := filePart(f)
		if err != nil {
			return err
		}
		prompt.Files = append(prompt.Files, part)
	}

	base := o.url
	if base == "" {
		a, err := startEmbedded(ctx, setup, o)
		var held *lockfile.HeldError
		switch {
		case errors.As(err, &held) && held.URL() != "":
			// A server holds the database: it answers instead, with
			// its own configuration.
			base = held.URL()
			fmt.Fprintf(os.Stderr, "agentd run: using the server at %s (it holds %s)\n", base, held.Path)
		case err != nil:
			return err
		default:
			defer a.Stop(context.Background())
			base = a.URL()
		}
	}
	c := newClient(base)
	// Detached from the signal context: the first Ctrl-C aborts the run,
	// and its end is still to be seen.
	work := context.WithoutCancel(ctx)
	sid, err := pickSession(work, c, o, wd)
	if err != nil {
		return err
	}
	return follow(ctx, work, stopSignals, c, sid, prompt, o)
}

// startEmbedded starts a server for this one run, configured exactly as
// serve would be.
func startEmbedded(ctx context.Context, setup app.Setup, o runFlags) (*app.App, error) {
	log, err := newLogger(os.Stderr, "text", o.logLevel)
	if err != nil {
		return nil, err
	}
	db := o.db
	if db == "" {
		db = os.Getenv("AGENTD_DATABASE_URL")
	}
	if db == "" {
		db = defaultDBPath()
	}
	cfg, loaded, err := app.Configure(setup, app.Config{DBPath: db, Host: "127.0.0.1", Port: 0, Version: version,
		Security: serverSecurityLoopback(), Logger: log})
	if err != nil {
		return nil, err
	}
	for _, w := range loaded.Warnings {
		log.Warn("configuration: ignored", "file", w.File, "line", w.Line, "key", w.Key, "why", w.Msg)
	}
	if m := o.model; m != "" {
		ref, _ := config.ParseModel(m)
		if _, _, err := cfg.Models.Resolve(ref); err != nil {
			return nil, fmt.Errorf("--model %s: %w", m, err)
		}
	}
	a, err := app.Start(context.WithoutCancel(ctx), cfg)
	var held *lockfile.HeldError
	if errors.As(err, &held) && held.URL() == "" {
		return nil, fmt.Errorf("%w\nA process that serves no URL yet holds this database: wait for it, send the prompt to a server with --url (or AGENTD_URL), or give this run its own --db", err)
	}
	return a, err
}

// pickSession returns the session to prompt: --session, the directory's
// latest with --continue, or a new one.
func pickSession(ctx context.Context, c *client.Client, o runFlags, wd string) (string, error) {
	switch {
	case o.session != "":
		if _, err := c.Session(ctx, o.session); err != nil {
			return "", fmt.Errorf("--session %s: %w", o.session, err)
		}
		return o.session, nil
	case o.cont:
		list, err := c.Sessions(ctx, 200)
		if err != nil {
			return "", err
		}
		for _, s := range list {
			if s.ParentID == "" && s.Directory == wd {
				return s.ID, nil
			}
		}
		return "", fmt.Errorf("--continue: no session of %s to continue (run once without it)", wd)
	}
	s, err := c.CreateSession(ctx, "", wd)
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// maxAttach bounds what --file attaches in all: the prompt travels in one
// request body.
const maxAttach = 4 << 20

// filePart reads a file into a file part whose data travels with the
// prompt, so that the model reads what the file held when it was sent: a
// text file, a picture (PNG, JPEG, GIF, WebP) or a PDF, typed by what its
// bytes are. A directory goes as its file: URL, which the server lists
// (as opencode run --file sends it).
func filePart(path string) (client.FilePart, error) {
	st, err := os.Stat(path)
	if err != nil {
		return client.FilePart{}, fmt.Errorf("--file: %w", err)
	}
	if st.IsDir() {
		abs, err := filepath.Abs(path)
		if err != nil {
			return client.FilePart{}, fmt.Errorf("--file: %w", err)
		}
		return client.FilePart{Mime: "application/x-directory", Filename: filepath.Base(abs),
			URL: (&url.URL{Scheme: "file", Path: abs}).String()}, nil
	}
	if !st.Mode().IsRegular() {
		return client.FilePart{}, fmt.Errorf("--file %s: not a regular file", path)
	}
	if st.Size() > maxAttach {
		return client.FilePart{}, fmt.Errorf("--file %s: %d bytes is over the limit of %d", path, st.Size(), maxAttach)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return client.FilePart{}, fmt.Errorf("--file: %w", err)
	}
	typ, _, _ := strings.Cut(http.DetectContentType(data), ";")
	switch {
	case llm.ModalityOf(typ) != "":
	case utf8.Valid(data):
		typ = mime.TypeByExtension(filepath.Ext(path))
		if typ == "" || !strings.HasPrefix(typ, "text/") && !strings.Contains(typ, "json") && !strings.Contains(typ, "xml") {
			typ = "text/plain"
		}
		typ, _, _ = strings.Cut(typ, ";")
	default:
		return client.FilePart{}, fmt.Errorf("--file %s: not text, a picture (PNG, JPEG, GIF, WebP) or a PDF", path)
	}
	return client.FilePart{Mime: typ, Filename: filepath.Base(path),
		URL: "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(data)}, nil
}

// follow sends the prompt and follows its run to the end, answering
// permission asks; it returns the run's outcome as an exit code.
func follow(ctx, work context.Context, stopSignals context.CancelFunc, c *client.Client, sid string, p client.Prompt, o runFlags) error {
	out := newPrinter(sid, p.MessageID, o.format == "json")
	streamCtx, cancelStream := context.WithCancel(work)
	defer cancelStream()
	streamErr := make(chan error, 1)
	go func() { streamErr <- stream(streamCtx, c, sid, out) }()
	select {
	case <-out.connected:
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
	out.setRun(runID)
	asker := &asker{c: c, out: out, yes: o.yes, interactive: isTerminal(os.Stdin) && isTerminal(os.Stderr)}
	defer asker.close()
	aborted, unanswered := false, false
	abort := func(why string) error {
		if aborted {
			return nil
		}
		aborted = true
		fmt.Fprintln(os.Stderr, why)
		_, err := c.Abort(work, sid)
		return err
	}
	for {
		select {
		case run := <-out.result:
			// The stream goroutine writes output too: it ends first.
			cancelStream()
			<-streamErr
			out.finish(run)
			switch {
			case unanswered:
				return exitError{3}
			case run.State == core.RunSucceeded:
				return nil
			case run.State == core.RunInterrupted:
				return exitError{130}
			}
			return exitError{1}
		case err := <-streamErr:
			if err == nil {
				err = errors.New("event stream ended")
			}
			return err
		case req := <-out.asks:
			ok, err := asker.answer(work, req)
			if err != nil {
				return err
			}
			if !ok {
				// The request was rejected without a message: the run
				// ends there by itself (interrupted/rejected).
				unanswered = true
			}
		case q := <-out.questions:
			if err := asker.question(work, q); err != nil {
				return err
			}
		case <-ctx.Done():
			stopSignals()
			if err := abort("\naborting…"); err != nil {
				return err
			}
		}
	}
}

// stream follows the session's events, resuming after the last one seen
// when the connection breaks (a server restart, a proxy's timeout), so
// that nothing durable is missed.
func stream(ctx context.Context, c *client.Client, sid string, out *printer) error {
	var last int64
	resumed := false
	for attempt := 0; ; attempt++ {
		// The whole log, not the session's: a subagent's session may ask
		// for permission too.
		err := c.Events(ctx, "", last, resumed, func(ev client.Event) error {
			switch {
			case ev.Type == core.EventServerConnected:
				// The head when first opened is where a resume starts
				// when no durable event came before the drop.
				if !resumed {
					last = ev.Head
				}
			case ev.Seq > 0:
				last = ev.Seq
			}
			return out.handle(ev)
		})
		if ctx.Err() != nil {
			return nil
		}
		var ce *client.Error
		if errors.As(err, &ce) || attempt >= 30 || !out.isConnected() {
			return err
		}
		resumed = true
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// asker answers the run's permission requests and questions: on a
// terminal by asking, with --yes by allowing, and otherwise not at all.
type asker struct {
	c           *client.Client
	out         *printer
	yes         bool
	interactive bool
	in          *stdinReader
}

// readLine reads one line of the user's answer; ok is false at the end of
// input.
func (a *asker) readLine(ctx context.Context) (string, bool) {
	return a.input().read(ctx, a.out.over, false)
}

// readKey reads one key of the user's answer, without waiting for Enter.
func (a *asker) readKey(ctx context.Context) (string, bool) {
	return a.input().read(ctx, a.out.over, true)
}

func (a *asker) input() *stdinReader {
	if a.in == nil {
		a.in = newStdinReader(os.Stdin)
	}
	return a.in
}

// close puts the terminal back as it was, should a key read be pending.
func (a *asker) close() {
	if a.in != nil {
		a.in.restore()
	}
}

// answer replies to a permission request. It returns false when no one
// could answer it (then it was rejected).
func (a *asker) answer(ctx context.Context, req core.PermissionRequest) (bool, error) {
	a.out.pause()
	what := describeAsk(req)
	switch {
	case a.yes:
		fmt.Fprintf(os.Stderr, "✓ allowed %s (--yes)\n", what)
		return true, a.c.ReplyPermission(ctx, req.ID, core.ReplyOnce, "")
	case !a.interactive:
		fmt.Fprintf(os.Stderr, "✗ %s asks for permission, and there is no terminal to ask on.\n"+
			"  Rerun with --yes to allow every ask, or allow it in agentd.json (\"permission\": {\"%s\": …}).\n", what, req.Permission)
		return false, a.c.ReplyPermission(ctx, req.ID, core.ReplyReject, "")
	}
	for {
		fmt.Fprintf(os.Stderr, "? %s\n", what)
		if len(req.Always) > 0 {
			fmt.Fprintf(os.Stderr, "  always would allow, for this session: %s\n", strings.Join(req.Always, ", "))
		}
		fmt.Fprint(os.Stderr, "  [o]nce, [a]lways, [r]eject: ")
		line, ok := a.readKey(ctx)
		if ok {
			fmt.Fprintln(os.Stderr, line) // the key, as the terminal no longer echoes it
		}
		if !ok {
			fmt.Fprintln(os.Stderr)
			if a.runOver() {
				return true, nil // the request was closed with its run
			}
			return false, a.c.ReplyPermission(ctx, req.ID, core.ReplyReject, "")
		}
		switch strings.ToLower(line) {
		case "o", "once", "y", "yes":
			return true, a.c.ReplyPermission(ctx, req.ID, core.ReplyOnce, "")
		case "a", "always":
			return true, a.c.ReplyPermission(ctx, req.ID, core.ReplyAlways, "")
		case "r", "reject", "n", "no":
			// opencode's rule: a reason goes to the model, which goes on;
			// without one the turn ends there.
			fmt.Fprint(os.Stderr, "  tell the model why, and it goes on (empty: the turn ends here): ")
			why, _ := a.readLine(ctx)
			return true, a.c.ReplyPermission(ctx, req.ID, core.ReplyReject, why)
		}
		fmt.Fprintln(os.Stderr, "  answer o, a or r")
	}
}

func (a *asker) runOver() bool {
	select {
	case <-a.out.over:
		return true
	default:
		return false
	}
}

// describeAsk says what a permission request is for, in a line.
func describeAsk(req core.PermissionRequest) string {
	what := req.Title
	if what == "" {
		what = strings.Join(req.Patterns, ", ")
	}
	return fmt.Sprintf("%s: %s", req.Permission, what)
}

// question answers a question the model asked: on a terminal the user
// picks options or types an answer; otherwise it is dismissed.
func (a *asker) question(ctx context.Context, q core.QuestionRequest) error {
	a.out.pause()
	if !a.interactive {
		fmt.Fprintln(os.Stderr, "✗ the model asked a question, and there is no terminal to ask on: dismissed")
		return a.c.RejectQuestion(ctx, q.ID)
	}
	answers := make([][]string, len(q.Questions))
	for i, item := range q.Questions {
		fmt.Fprintf(os.Stderr, "? %s\n", item.Question)
		for j, opt := range item.Options {
			fmt.Fprintf(os.Stderr, "  %d. %s", j+1, opt.Label)
			if opt.Description != "" {
				fmt.Fprintf(os.Stderr, " — %s", opt.Description)
			}
			fmt.Fprintln(os.Stderr)
		}
		fmt.Fprint(os.Stderr, "  a number, or your own answer (empty dismisses): ")
		line, ok := a.readLine(ctx)
		if a.runOver() {
			return nil
		}
		if !ok || line == "" {
			return a.c.RejectQuestion(ctx, q.ID)
		}
		var n int
		if _, err := fmt.Sscanf(line, "%d", &n); err == nil && n >= 1 && n <= len(item.Options) && fmt.Sprint(n) == line {
			line = item.Options[n-1].Label
		}
		answers[i] = []string{line}
	}
	return a.c.ReplyQuestion(ctx, q.ID, answers)
}
