package pty_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/sandbox"
)

// BenchmarkStartAndRemove is a terminal's life without output: open the
// pseudo-terminal, start a shell (confined where Landlock is), remove it.
func BenchmarkStartAndRemove(b *testing.B) {
	for _, confined := range []bool{false, true} {
		b.Run("sandbox="+strconv.FormatBool(confined), func(b *testing.B) {
			cfg := pty.Config{Logger: quiet()}
			if confined {
				sb, err := sandbox.New(sandbox.Config{})
				if sb == nil || err != nil {
					b.Skip("no Landlock here")
				}
				cfg.Sandbox = sb
			}
			m := pty.New(cfg)
			if err := m.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer m.Stop()
			dir := b.TempDir()
			for b.Loop() {
				info, err := m.Create(pty.CreateInput{Dir: dir, Command: "/bin/sh", Args: []string{"-c", "read x"}})
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Remove(info.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEchoRoundTrip is a keystroke's way: a line typed on the
// websocket, through the terminal and cat, back on the websocket.
func BenchmarkEchoRoundTrip(b *testing.B) {
	m := pty.New(pty.Config{Logger: quiet()})
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	info, err := m.Create(pty.CreateInput{Dir: b.TempDir(), Command: "/bin/sh", Args: []string{"-c", "stty -echo; cat"}})
	if err != nil {
		b.Fatal(err)
	}
	srv := newServer(m)
	defer srv.Close()
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/pty/"+info.ID+"/connect?cursor=-1", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx); err != nil { // the cursor frame
		b.Fatal(err)
	}
	for b.Loop() {
		if err := c.Write(ctx, websocket.MessageText, []byte("ping\n")); err != nil {
			b.Fatal(err)
		}
		var got strings.Builder
		for !strings.Contains(got.String(), "ping\r\n") {
			_, data, err := c.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got.Write(data)
		}
	}
}
