package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
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
	return c
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdSessions(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	url := fs.String("url", defaultURL(), "server URL")
	limit := fs.Int("limit", 50, "how many sessions")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	list, err := newClient(*url).Sessions(ctx, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(list)
	}
	for _, s := range list {
		fmt.Printf("%s  %s  %s  %s\n", s.ID, time.UnixMilli(s.Time.Updated).Format(time.DateTime), s.Directory, s.Title)
	}
	return nil
}

func cmdStatus(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	url := fs.String("url", defaultURL(), "server URL")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
	}
	c := newClient(*url)
	if fs.NArg() == 0 {
		m, err := c.Statuses(ctx)
		if err != nil {
			return err
		}
		return printJSON(m)
	}
	st, err := c.Status(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	return printJSON(st)
}

func cmdWait(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	url := fs.String("url", defaultURL(), "server URL")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (exit 124)")
	runID := fs.String("run", "", "wait for this run instead of the session")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: agentd wait [--timeout D] [--run ID] SESSION")
		return exitError{2}
	}
	st, err := newClient(*url).Wait(ctx, fs.Arg(0), *runID, *timeout)
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

func cmdAbort(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("abort", flag.ContinueOnError)
	url := fs.String("url", defaultURL(), "server URL")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: agentd abort SESSION")
		return exitError{2}
	}
	ok, err := newClient(*url).Abort(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Println(ok)
	return nil
}

func cmdEvents(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	url := fs.String("url", defaultURL(), "server URL")
	after := fs.Int64("after", 0, "replay events after this seq")
	follow := fs.Bool("follow", false, "keep following new events")
	session := fs.String("session", "", "only this session's events")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
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
