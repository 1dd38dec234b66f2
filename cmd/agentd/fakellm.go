package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/fakellm"
)

var fakellmHelp = help{
	usage: "fakellm [flags]",
	about: `Serves the scripted fake model provider over the real protocols (OpenAI Chat
Completions at /v1/chat/completions, Anthropic Messages at /v1/messages): its answers
obey the same directives as agentd/scripted (reply:TEXT, fail:429, tool:NAME:{json}).`,
	examples: []string{
		"agentd fakellm --port 9999",
		`OPENAI_API_KEY=x OPENAI_BASE_URL=http://127.0.0.1:9999/v1 agentd run --model openai/fake "reply:hi"`,
	},
}

// cmdFakeLLM serves the scripted fake provider until interrupted.
func cmdFakeLLM(ctx context.Context, args []string) error {
	fs := newFlags("fakellm")
	host := fs.String("hostname", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 0, "port (0 picks a free one)")
	second := fs.Duration("second", time.Second, "length of one sleep: second")
	if _, err := parse(fs, fakellmHelp, args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: fakellm.New(fakellm.Options{Second: *second}).Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "fakellm listening url=http://%s (OpenAI: /v1/chat/completions, Anthropic: /v1/messages)\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
