package app_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
)

// futureID is a well-formed id whose time bits are ahead of the server's
// clock, as a client with a fast clock would make.
func futureID(prefix string, ahead time.Duration) string {
	v := uint64(time.Now().Add(ahead).UnixMilli()) * 4096
	return fmt.Sprintf("%s_%012x%s", prefix, v&0xffffffffffff, "AAAAAAAAAAAAAA")
}

// TestClientIDsDoNotOrder: a client message id that sorts after every id
// the server makes (its clock a minute fast) changes nothing: the run
// answers it in one step, not one step per message the server adds.
func TestClientIDsDoNotOrder(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	sid := n.session()
	m, err := n.c.Send(t.Context(), sid, client.Prompt{Text: "reply:quick", MessageID: futureID("msg", time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if textOf(m) != "quick" {
		t.Errorf("answer = %q", textOf(m))
	}
	runs, _ := n.c.Runs(t.Context(), sid)
	if runs[0].Steps != 1 || runs[0].State != core.RunSucceeded {
		t.Errorf("run took %d steps and ended %s; want 1 and succeeded", runs[0].Steps, runs[0].State)
	}
	msgs := mustMessages(t, n, sid)
	if msgs[0].Info.Role != core.RoleUser || msgs[len(msgs)-1].Info.Role != core.RoleAssistant {
		t.Error("the transcript is not in the order things happened")
	}
}

// TestClientIDsCannotCrossSessions: a part id that exists in another
// session is refused with 409, and that session's part is untouched.
func TestClientIDsCannotCrossSessions(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	victim := n.session()
	n.send(victim, "reply:secret answer")
	var victimPart core.Part
	for _, m := range mustMessages(t, n, victim) {
		for _, p := range m.Parts {
			if p.Type == core.PartText && m.Info.Role == core.RoleAssistant {
				victimPart = p
			}
		}
	}
	attacker := n.session()
	body := fmt.Sprintf(`{"parts":[{"id":%q,"type":"text","text":"reply:overwritten"}]}`, victimPart.ID)
	resp, err := http.Post(n.app.URL()+"/session/"+attacker+"/message", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("reusing another session's part id answered %d: %s", resp.StatusCode, b)
	}
	for _, m := range mustMessages(t, n, victim) {
		for _, p := range m.Parts {
			if p.ID == victimPart.ID && p.Text != "secret answer" {
				t.Errorf("the other session's part became %q", p.Text)
			}
		}
	}
	if msgs := mustMessages(t, n, attacker); len(msgs) != 0 {
		t.Errorf("the refused prompt left %d messages", len(msgs))
	}
	// A message id of another session is refused too.
	_, err = n.c.Send(t.Context(), attacker, client.Prompt{Text: "reply:x", MessageID: mustMessages(t, n, victim)[0].Info.ID})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusConflict {
		t.Errorf("reusing another session's message id: %v", err)
	}
}

// TestConnectionCap: connections beyond the cap are answered 503 at once,
// and the place is given back when a connection closes.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.MaxConns = 2 })
	addr := strings.TrimPrefix(n.app.URL(), "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Both places are taken once the server has accepted them.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET /global/health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.Contains(line, "503") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a third connection was served: %q", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Over the cap, nothing is written before a request was read: a
	// client that has not asked yet finds no answer waiting, and Go's
	// client (which would discard one as unsolicited) gets the 503.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := c.Read(make([]byte, 64)); b > 0 || err == nil {
		t.Errorf("an answer came before a request: %d bytes, %v", b, err)
	}
	c.Close()
	resp, err := http.Get(n.app.URL() + "/global/health")
	if err != nil {
		t.Fatalf("over the cap, Go's client got an error instead of a 503: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the cap: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range held {
		c.Close()
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, err := n.c.Health(t.Context()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the places were not given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStalledBodyTimesOut: a client that sends headers and part of a body
// and then stalls gets its 400 once the body deadline passes, and the
// connection is closed; it cannot hold the connection by draining.
func TestStalledBodyTimesOut(t *testing.T) {
	t.Parallel()
	n := startNode(t, func(c *app.Config) { c.BodyTimeout = 300 * time.Millisecond })
	sid := n.session()
	addr := strings.TrimPrefix(n.app.URL(), "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /session/%s/prompt_async HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"parts\":", sid, addr)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	rest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(rest), "request body") {
		t.Errorf("answer = %d %s", resp.StatusCode, rest)
	}
	// The server closes the connection: the next read ends at once.
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the answer took %v", d)
	}
}

// TestTLS: with a certificate the node serves HTTPS only.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	n := startNode(t, func(c *app.Config) { c.TLSCert, c.TLSKey = certFile, keyFile })
	if !strings.HasPrefix(n.app.URL(), "https://") {
		t.Fatalf("url = %s", n.app.URL())
	}
	pool := x509.NewCertPool()
	cert, _ := x509.ParseCertificate(der)
	pool.AddCert(cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	c := client.New(n.app.URL())
	c.HTTP = &http.Client{Transport: tr}
	if _, err := c.Health(t.Context()); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
}

// TestAbortWhateverTheTool: abort ends the run interrupted/aborted
// without waiting for the tool, even when the tool left its process group
// (and ignores SIGTERM) or is a tool that ignores its context; nothing the
// call started survives; and shutdown does not wait for such a tool. The
// stuck tool returns only when the test lets it, after the abort and the
// shutdown have returned: that they returned at all is the promise, with
// no clock in the verdict (under load a one-second bound timed the
// machine). The durations go to the log.
func TestAbortWhateverTheTool(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	// Registered before the node, so that it runs after the node's stop:
	// the tools left behind end before the package's leak check.
	t.Cleanup(func() { close(release) })
	n := startNode(t, func(c *app.Config) {
		c.Tools.Add(&tool.Func{ToolName: "stuck", Desc: "Ignores cancellation until the test lets it go.",
			Fn: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				entered <- struct{}{}
				<-release
				return tool.Result{Output: "late"}, nil
			}})
		c.Engine.ShutdownGrace = time.Second
	})
	for _, prompt := range []string{
		`tool:bash:{"command":"trap '' TERM; setsid sh -c 'trap \"\" TERM; echo $$ > escaped.pid; sleep 600' & sleep 600"}`,
		`tool:stuck:{}`,
	} {
		sid := n.session()
		if err := n.c.SendAsync(t.Context(), sid, client.Prompt{Text: prompt}); err != nil {
			t.Fatal(err)
		}
		n.waitToolRunning(sid)
		if strings.Contains(prompt, "escaped.pid") {
			// The escaped child is the one to outlive the abort: abort
			// once it runs (a confined command starts through the
			// sandbox's trampoline, this test binary under -race: slow).
			waitFile(t, filepath.Join(n.cfg.Directory, "escaped.pid"))
		} else {
			<-entered
		}
		start := time.Now()
		if ok, err := n.c.Abort(t.Context(), sid); err != nil || !ok {
			t.Fatalf("abort: %v %v", ok, err)
		}
		t.Logf("%s: abort took %v", prompt, time.Since(start))
		if st := n.status(sid); st.Last.Outcome != core.RunInterrupted || st.Last.Reason != core.ReasonAborted {
			t.Errorf("%s: status = %+v", prompt, st)
		}
	}
	b, _ := os.ReadFile(filepath.Join(n.cfg.Directory, "escaped.pid"))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		t.Errorf("the escaped child never started: %q", b)
	} else if alive(pid) {
		t.Errorf("the escaped child %d outlived the abort", pid)
	}
	// A run stuck in a tool does not hold shutdown.
	sid := n.session()
	n.c.SendAsync(t.Context(), sid, client.Prompt{Text: `tool:stuck:{}`})
	n.waitToolRunning(sid)
	<-entered
	start := time.Now()
	n.stop()
	t.Logf("shutdown took %v with a stuck tool", time.Since(start))
}

// waitFile waits until the file at p holds something.
func waitFile(t *testing.T, p string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether a process runs (a zombie has ended; only its
// parent has not reaped it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// chunky streams a long answer in chunks, a little apart, so that the
// engine has many chances to write it.
type chunky struct {
	chunks int
	size   int
}

func (c chunky) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	chunk := strings.Repeat("x", c.size-1) + " "
	for range c.chunks {
		if err := emit(llm.Event{Kind: llm.EventText, Text: chunk}); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return emit(llm.Event{Kind: llm.EventFinish, Finish: "stop"})
}

// streamedBytesWritten streams an answer of chunks×size bytes and returns
// how many bytes of the part's snapshots went into the event log.
func streamedBytesWritten(t testing.TB, chunks, size int) (written, streamed int) {
	models := llm.NewRegistry()
	models.Add("long", chunky{chunks: chunks, size: size}, nil)
	models.Add(scripted.ProviderID, &scripted.Model{}, nil)
	a, err := app.Start(context.Background(), app.Config{DBPath: filepath.Join(t.TempDir(), "a.db"), Host: "127.0.0.1",
		Version: "t", Directory: t.TempDir(), Logger: quietLogger(), Heartbeat: time.Hour, Models: models,
		SQLiteSynchronous: "NORMAL", Engine: engine.Config{FlushInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	c := client.New(a.URL())
	s, _ := c.CreateSession(context.Background(), "", "")
	if _, err := c.Send(context.Background(), s.ID, client.Prompt{Text: "go", Model: &client.ModelRef{ProviderID: "long", ModelID: "m"}}); err != nil {
		t.Fatal(err)
	}
	var after int64
	for {
		evs, err := a.Store.Events(context.Background(), store.EventQuery{After: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == core.EventPartUpdated && strings.Contains(string(ev.Properties), `"type":"text"`) {
				written += len(ev.Properties)
			}
		}
		if len(evs) < 100 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	return written, chunks * size
}

// TestStreamingWritesStayLinear: however long an answer streams, what is
// written of it is a constant factor of its size (snapshots grow
// geometrically), not its square.
func TestStreamingWritesStayLinear(t *testing.T) {
	t.Parallel()
	written, streamed := streamedBytesWritten(t, 500, 4096)
	if ratio := float64(written) / float64(streamed); ratio > 4 {
		t.Errorf("%d bytes written for %d streamed: %.1f per byte", written, streamed, ratio)
	}
}

// BenchmarkStreamedBytesWritten reports bytes written to the event log
// per byte streamed, for a 300 KB and a 5 MB answer.
func BenchmarkStreamedBytesWritten(b *testing.B) {
	for _, c := range []struct {
		name         string
		chunks, size int
	}{{"300KB", 300, 1024}, {"5MB", 1280, 4096}} {
		b.Run(c.name, func(b *testing.B) {
			var ratio float64
			for b.Loop() {
				w, s := streamedBytesWritten(b, c.chunks, c.size)
				ratio = float64(w) / float64(s)
			}
			b.ReportMetric(ratio, "written/streamed")
		})
	}
}
