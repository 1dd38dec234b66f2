package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	}
	return err.Error()
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
	about:   "Waits until the session is idle (or --run has ended), prints its status as JSON, and exits with how its last run ended.",
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
	pos, err := parse(fs, waitHelp, args)
	if err != nil {
		return err
	}
	st, err := newClient(*url).Wait(ctx, pos[0], *runID, *timeout)
	var ce *client.Error
	if errors.As(err, &ce) && ce.StatusCode == 408 {
		_ = printJSON(st)
		return exitError{124}
	}
	if err != nil {
		return err
	}
	if err := printJSON(st); err != nil {
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
	about:   "Aborts the session's active run: it ends interrupted/aborted, its tools stopped. Prints true when there was a run to abort.",
	minArgs: 1, maxArgs: 1,
	examples: []string{"agentd abort ses_01J…"},
	env:      clientEnv,
}

func cmdAbort(ctx context.Context, args []string) error {
	fs := newFlags("abort")
	url := fs.String("url", defaultURL(), "server URL")
	pos, err := parse(fs, abortHelp, args)
	if err != nil {
		return err
	}
	ok, err := newClient(*url).Abort(ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Println(ok)
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
