package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
)

func defaultURL() string {
	if u := os.Getenv("AGENTD_URL"); u != "" {
		return u
	}
	return "http://127.0.0.1:4096"
}

func newClient(url string) *client.Client {
	c := client.New(url)
	c.Password = firstEnv("AGENTD_SERVER_PASSWORD", "OPENCODE_SERVER_PASSWORD")
	c.Username = firstEnv("AGENTD_SERVER_USERNAME", "OPENCODE_SERVER_USERNAME")
	c.Token = os.Getenv("AGENTD_API_KEY")
	return c
}

// explain turns an error into what to do about it, for the errors a
// newcomer meets first: no server there, or a password missing.
func explain(err error) string {
	var ue *url.Error
	var ce *client.Error
	switch {
	case errors.As(err, &ue) && (errors.Is(err, syscall.ECONNREFUSED) || isDNS(err)):
		where := ue.URL
		if u, perr := url.Parse(ue.URL); perr == nil {
			where = u.Scheme + "://" + u.Host
		}
		return fmt.Sprintf("no agentd answers at %s (%v).\nStart one with \"agentd serve\", or point --url or AGENTD_URL at a running server.", where, ue.Err)
	case errors.As(err, &ce) && ce.StatusCode == 401:
		return err.Error() + "\nThe server wants a password: set AGENTD_SERVER_PASSWORD (and AGENTD_SERVER_USERNAME if it is not opencode), or an API key's token in AGENTD_API_KEY."
	case errors.As(err, &ue):
		return explainURLError(ue)
	}
	return err.Error()
}

// explainURLError says in a line what went wrong talking to a server,
// without Go's request text (`Post "http://…/wait?timeout=…": EOF`).
func explainURLError(ue *url.Error) string {
	u, perr := url.Parse(ue.URL)
	if ue.Op == "parse" || perr != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		where := ue.URL
		if perr == nil && u.Path != "" {
			where = strings.TrimSuffix(where, u.RequestURI())
		}
		return fmt.Sprintf("%q is not a server address: --url (or AGENTD_URL) takes http://HOST:PORT, as in http://127.0.0.1:4096", where)
	}
	where := u.Scheme + "://" + u.Host
	switch {
	case errors.Is(ue, io.EOF), errors.Is(ue, io.ErrUnexpectedEOF), errors.Is(ue, syscall.ECONNRESET):
		return fmt.Sprintf("the server at %s closed the connection before it answered: it stopped or restarted; run the command again once it is back", where)
	case ue.Timeout():
		return fmt.Sprintf("the server at %s did not answer in time", where)
	}
	return fmt.Sprintf("cannot talk to the server at %s: %v", where, ue.Err)
}

func isDNS(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

var sessionsHelp = help{
	usage: "sessions [flags]",
	about: "Lists sessions, most recently updated first, with their status and how their last run ended.",
	examples: []string{
		"agentd sessions",
		"agentd sessions --limit 5 --json | jq '.[].id'",
	},
	env: clientEnv,
}

func cmdSessions(ctx context.Context, args []string) error {
	fs := newFlags("sessions")
	url := fs.String("url", defaultURL(), "server URL")
	limit := fs.Int("limit", 50, "how many sessions")
	asJSON := fs.Bool("json", false, "print the sessions as JSON (opencode's shape)")
	if _, err := parse(fs, sessionsHelp, args); err != nil {
		return err
	}
	c := newClient(*url)
	list, err := c.Sessions(ctx, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(list)
	}
	if len(list) == 0 {
		fmt.Println("no sessions yet: agentd run \"reply:hello\" makes one")
		return nil
	}
	statuses := make([]core.SessionStatus, len(list))
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, s := range list {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			statuses[i], errs[i] = c.Status(ctx, s.ID)
		})
	}
	wg.Wait()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tLAST RUN\tUPDATED\tTITLE")
	for i, s := range list {
		status, last := "?", ""
		if errs[i] == nil {
			status, last = statusWord(statuses[i]), lastWord(statuses[i].Last)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, status, last, ago(s.Time.Updated), truncate(s.Title, 50))
	}
	return tw.Flush()
}

// statusWord is a status in a word or two: idle, busy (its phase), retry.
func statusWord(st core.SessionStatus) string {
	switch {
	case st.Type == core.StatusBusy && st.Phase != "":
		return "busy (" + strings.ReplaceAll(string(st.Phase), "_", " ") + ")"
	case st.Type == core.StatusRetry:
		return fmt.Sprintf("retry %d", st.Attempt)
	}
	return st.Type
}

// lastWord is how a session's last run ended: "succeeded", "failed
// (max_steps)", or "-" when it never ran.
func lastWord(l *core.LastRun) string {
	if l == nil {
		return "-"
	}
	if l.Reason != "" {
		return string(l.Outcome) + " (" + string(l.Reason) + ")"
	}
	return string(l.Outcome)
}

func ago(ms int64) string {
	if ms == 0 {
		return "-"
	}
	d := time.Since(time.UnixMilli(ms))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return time.UnixMilli(ms).Format(time.DateOnly)
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

var statusHelp = help{
	usage:   "status [flags] [SESSION]",
	about:   "Shows one session's status (idle, busy with its phase, retry) and how its last run ended; without a session, every busy one.",
	maxArgs: 1,
	examples: []string{
		"agentd status ses_01J…",
		"agentd status                 # every busy session",
		"agentd status --json ses_01J… # opencode's shape, with agentd's fields",
	},
	env:   clientEnv,
	exits: []string{"1  the session does not exist (or another error)"},
}

func cmdStatus(ctx context.Context, args []string) error {
	fs := newFlags("status")
	url := fs.String("url", defaultURL(), "server URL")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, statusHelp, args)
	if err != nil {
		return err
	}
	c := newClient(*url)
	if len(pos) == 0 {
		m, err := c.Statuses(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(m)
		}
		if len(m) == 0 {
			fmt.Println("no session is busy")
			return nil
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SESSION\tSTATUS\tRUN\tSINCE")
		for id, st := range m {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id, statusWord(st), st.RunID, ago(st.Since))
		}
		return tw.Flush()
	}
	st, err := c.Status(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(st)
	}
	fmt.Println(describeStatus(pos[0], st))
	return nil
}

// describeStatus is a status in a sentence.
func describeStatus(id string, st core.SessionStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", id, statusWord(st))
	switch st.Type {
	case core.StatusBusy:
		fmt.Fprintf(&b, ", run %s since %s", st.RunID, ago(st.Since))
	case core.StatusRetry:
		fmt.Fprintf(&b, ", run %s: %s", st.RunID, st.Message)
		if st.Next > 0 {
			fmt.Fprintf(&b, "; next try in %s", time.Until(time.UnixMilli(st.Next)).Round(time.Second))
		}
	}
	if l := st.Last; l != nil {
		fmt.Fprintf(&b, "\nlast run %s %s, %s", l.RunID, lastWord(l), ago(l.Time))
		if l.Error != nil && l.Error.Data.Message != "" {
			fmt.Fprintf(&b, ": %s", l.Error.Data.Message)
		}
	} else if st.Type == core.StatusIdle {
		b.WriteString(", never ran")
	}
	return b.String()
}

var waitHelp = help{
	usage:   "wait [flags] SESSION",
	about:   "Waits until the session is idle (or --run has ended), prints its status as status does (--json: as JSON), and exits with how its last run ended.",
	minArgs: 1, maxArgs: 1,
	examples: []string{
		"agentd wait ses_01J… && echo done",
		"agentd wait --timeout 30s --run run_01J… ses_01J…",
	},
	env: clientEnv,
	exits: []string{
		"0  idle, and the last run succeeded (or the session never ran)",
		"1  the last run failed",
		"124  --timeout passed first (the session is still busy)",
		"130  the last run was interrupted: aborted, or cut off and not resumed",
	},
}

func cmdWait(ctx context.Context, args []string) error {
	fs := newFlags("wait")
	url := fs.String("url", defaultURL(), "server URL")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (exit 124)")
	runID := fs.String("run", "", "wait for this run instead of the session")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	pos, err := parse(fs, waitHelp, args)
	if err != nil {
		return err
	}
	st, err := newClient(*url).Wait(ctx, pos[0], *runID, *timeout)
	show := func() error {
		if *asJSON {
			return printJSON(st)
		}
		_, err := fmt.Println(describeStatus(pos[0], st))
		return err
	}
	var ce *client.Error
	if errors.As(err, &ce) && ce.StatusCode == 408 {
		_ = show()
		if !*asJSON {
			fmt.Fprintf(os.Stderr, "agentd wait: still busy after %s\n", *timeout)
		}
		return exitError{124}
	}
	if err != nil {
		return err
	}
	if err := show(); err != nil {
		return err
	}
	return outcomeExit(st.Last)
}

func outcomeExit(last *core.LastRun) error {
	if last == nil {
		return nil
	}
	switch last.Outcome {
	case core.RunFailed:
		return exitError{1}
	case core.RunInterrupted:
		return exitError{130}
	}
	return nil
}

var abortHelp = help{
	usage:   "abort [flags] SESSION",
	about:   "Aborts the session's active run: it ends interrupted/aborted, its tools stopped. An idle session has nothing to abort: that is said, with exit 3.",
	minArgs: 1, maxArgs: 1,
	examples: []string{"agentd abort ses_01J…", "agentd abort --json ses_01J…   # the server's answer: true or false"},
	env:      clientEnv,
	exits:    []string{"0  the active run was aborted", "1  the session does not exist (or another error)", "3  the session was idle: nothing to abort"},
}

func cmdAbort(ctx context.Context, args []string) error {
	fs := newFlags("abort")
	url := fs.String("url", defaultURL(), "server URL")
	asJSON := fs.Bool("json", false, "print the server's answer as JSON (true: a run was aborted)")
	pos, err := parse(fs, abortHelp, args)
	if err != nil {
		return err
	}
	ok, err := newClient(*url).Abort(ctx, pos[0])
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		fmt.Println(ok)
	case ok:
		fmt.Printf("%s: its run was aborted\n", pos[0])
	default:
		fmt.Fprintf(os.Stderr, "agentd abort: %s is idle: there is no run to abort\n", pos[0])
	}
	if !ok {
		return exitError{3}
	}
	return nil
}

var resumeHelp = help{
	usage:   "resume [flags] SESSION",
	about:   "Continues the session's run held paused after a restart (serve --resume=paused, or the session's resume setting). Prints the session's status.",
	minArgs: 1, maxArgs: 1,
	examples: []string{"agentd resume ses_01J…"},
	env:      clientEnv,
}

func cmdResume(ctx context.Context, args []string) error {
	fs := newFlags("resume")
	url := fs.String("url", defaultURL(), "server URL")
	pos, err := parse(fs, resumeHelp, args)
	if err != nil {
		return err
	}
	st, err := newClient(*url).Resume(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Println(statusWord(st))
	return nil
}

var eventsHelp = help{
	usage: "events [flags]",
	about: "Prints the durable event log, one event per line (seq, type, properties): everything after --after, then, with --follow, new events as they happen.",
	examples: []string{
		"agentd events --after 0",
		"agentd events --session ses_01J… --follow",
	},
	env: clientEnv,
}

func cmdEvents(ctx context.Context, args []string) error {
	fs := newFlags("events")
	url := fs.String("url", defaultURL(), "server URL")
	after := fs.Int64("after", 0, "replay events after this seq")
	follow := fs.Bool("follow", false, "keep following new events")
	session := fs.String("session", "", "only this session's events")
	if _, err := parse(fs, eventsHelp, args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Without --follow, stop once the replay has been quiet for a moment.
	quiet := time.AfterFunc(time.Hour, cancel)
	defer quiet.Stop()
	if !*follow {
		quiet.Reset(time.Second)
	}
	err := newClient(*url).Events(ctx, *session, *after, true, func(ev client.Event) error {
		if ev.Type == core.EventServerHeartbeat || ev.Type == core.EventServerConnected {
			return nil
		}
		if !*follow {
			quiet.Reset(300 * time.Millisecond)
		}
		fmt.Printf("%d %s %s\n", ev.Seq, ev.Type, ev.Properties)
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
