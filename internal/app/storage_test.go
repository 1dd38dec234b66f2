package app_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tmpfs"
	"github.com/agentd/agentd/internal/tool"
)

// logRecorder keeps every log record (debug included) for a test to read.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	changed chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{changed: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return nil
}

// matching returns the records whose message starts with prefix.
func (l *logRecorder) matching(prefix string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.records {
		if strings.HasPrefix(r.Message, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// waitFor blocks until at least n records start with prefix.
func (l *logRecorder) waitFor(t *testing.T, prefix string, n int) []slog.Record {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		if got := l.matching(prefix); len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-deadline:
			l.mu.Lock()
			for _, r := range l.records {
				t.Logf("log: %s %s", r.Level, r.Message)
			}
			l.mu.Unlock()
			t.Fatalf("never logged %d × %q", n, prefix)
		}
	}
}

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// TestDiskFull pins what a full disk does: a write the API cannot make is
// a 503 StorageFullError with Retry-After (nothing acknowledged), a run
// whose write is refused is neither failed nor retried in a hot loop (it
// pauses, longer each time up to the cap, and the failure is logged once),
// and once space returns every acknowledged prompt is answered without
// anyone's help. The disk is a real tmpfs filled by a tool of the run.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	dir := tmpfs.Mount(t, "32m")
	filler := filepath.Join(dir, "filler")
	release := make(chan struct{})
	logs := newLogRecorder()
	n := startNode(t, func(c *app.Config) {
		c.DBPath = filepath.Join(dir, "agentd.db")
		c.Logger = slog.New(logs)
		c.Engine.StoragePause.Base = 10 * time.Millisecond
		c.Engine.StoragePause.Cap = 80 * time.Millisecond
		// A checkpoint lets the next commit restart the WAL in the space
		// it already holds: the full disk would take writes again,
		// sooner or later depending on when the checkpoint ran.
		c.SQLiteCheckpointEvery = time.Hour
		c.Tools.Add(&tool.Func{ToolName: "fill", Desc: "Fill the database's disk.",
			Fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				<-release
				if err := tmpfs.FillFile(filler); err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Output: "filled"}, nil
			}})
	})
	sid := n.session()
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "tool:fill:{}"}); err != nil {
		t.Fatal(err)
	}
	n.waitToolRunning(sid)
	// Acknowledged before the disk fills, queued behind the first run.
	if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: "reply:queued before the disk filled", Busy: "queue"}); err != nil {
		t.Fatal(err)
	}
	close(release)

	// The run cannot write its tool result: it pauses, with a growing
	// delay up to the cap, and the failure is logged once.
	pauses := logs.waitFor(t, "paused by storage", 6)
	var last time.Duration
	for i, r := range pauses {
		d := attr(r, "delay").Duration()
		if i == 0 && d != 10*time.Millisecond || d < last && i > 0 && attr(pauses[i-1], "run").String() == attr(r, "run").String() || d > 80*time.Millisecond {
			t.Fatalf("pause %d waited %v after %v; want 10ms doubling up to 80ms", i, d, last)
		}
		last = d
	}
	if last != 80*time.Millisecond {
		t.Errorf("pauses never reached the cap: last %v", last)
	}

	// A prompt the server cannot write is refused, not acknowledged. A
	// failed write can leave room for a small one, so try a few.
	var acked []string
	var refused *client.Error
	for i := 0; i < 50 && refused == nil; i++ {
		text := "reply:sent while the disk was full " + strings.Repeat("z", 8<<10)
		err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: text, Busy: "queue"})
		switch {
		case err == nil:
			acked = append(acked, text)
		case errors.As(err, &refused):
		default:
			t.Fatal(err)
		}
	}
	if refused == nil || refused.StatusCode != 503 || refused.Name != "StorageFullError" || refused.RetryAfter != 10*time.Second {
		t.Fatalf("prompt on a full disk: %+v; want 503 StorageFullError with Retry-After 10", refused)
	}
	if got := logs.matching("run failed"); len(got) > 0 {
		t.Errorf("a storage failure failed a run: %v", attr(got[0], "err"))
	}

	// Space returns: everything acknowledged is answered, by itself.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "storage accepts writes again", 1)
	st := n.waitFor(sid, func(s core.SessionStatus) bool { return s.Type == core.StatusIdle })
	if st.Last == nil || st.Last.Outcome != core.RunSucceeded {
		t.Fatalf("after space returned: %+v", st)
	}
	runs, err := n.app.Store.Runs(t.Context(), sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.State != core.RunSucceeded {
			t.Errorf("run %s ended %s/%s: %v", r.ID, r.State, r.Reason, r.Error)
		}
	}
	msgs, err := n.c.Messages(t.Context(), sid)
	if err != nil {
		t.Fatal(err)
	}
	var transcript strings.Builder
	var fill *core.Part
	for _, m := range msgs {
		transcript.WriteString(textOf(m))
		if p := partOf(m, core.PartTool); p != nil && p.Tool == "fill" {
			fill = p
		}
	}
	for _, want := range append([]string{"queued before the disk filled"}, acked...) {
		if !strings.Contains(transcript.String(), strings.TrimPrefix(want, "reply:")) {
			t.Errorf("acknowledged prompt %.40q was never answered", want)
		}
	}
	// The tool ran, but its result was never written: its outcome is
	// unknown and it is not run again.
	if fill == nil || fill.State.Status != core.ToolError || !strings.Contains(fill.State.Error, "storage refused a write") {
		t.Errorf("fill call = %+v", fill)
	}
	// Each change of state is logged once, however many writes failed.
	if e, i := len(logs.matching("storage refuses writes")), len(logs.matching("storage accepts writes again")); e < 1 || e != i {
		t.Errorf("storage state logged %d times down, %d times up; want once each per change", e, i)
	}
}

// TestUnwritableDatabaseFailsStart pins that a server whose database
// cannot be written does not start (and so never reports healthy).
func TestUnwritableDatabaseFailsStart(t *testing.T) {
	t.Parallel()
	dir := tmpfs.Mount(t, "16m")
	n := startNode(t, func(c *app.Config) { c.DBPath = filepath.Join(dir, "agentd.db") })
	n.session()
	n.stop()
	tmpfs.ReadOnly(t, dir)
	a, err := app.Start(t.Context(), n.cfg)
	if err == nil {
		a.Stop(context.Background())
		t.Fatal("agentd started on a read-only database")
	}
	if !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("start-up error does not say why: %v", err)
	}
	t.Log(err)
}
