package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/fakellm"
)

// cmdFakeLLM serves the scripted fake provider until interrupted.
func cmdFakeLLM(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	host := fs.String("hostname", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 0, "port (0 picks a free one)")
	second := fs.Duration("second", time.Second, "length of one sleep: second")
	if err := fs.Parse(args); err != nil {
		return exitError{2}
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
