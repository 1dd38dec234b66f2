package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/bench"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fakellm"
)

// cmdBench drives a server with fakellm as its model and prints what it
// measured. Without --url it starts agentd itself on a fresh database, or
// --nodes nodes on the PostgreSQL database given by --database.
var benchHelp = help{
	usage: "bench [flags]",
	about: `Measures a server with fakellm as its model and prints throughput, latency percentiles
and memory per scenario, each beside this machine's reference measured in the same run
(the commit ceiling, a minimal Go server's and program's start, a CPU loop). Without --url
it starts agentd itself on a fresh database (or --nodes nodes on the PostgreSQL database
--database names).`,
	examples: []string{
		"agentd bench                                        # every scenario on a fresh agentd",
		"agentd bench --scenarios turn,concurrency --json out.json",
		"agentd bench --scenarios startup --against old=/tmp/agentd-main   # two builds' start-ups, interleaved",
		"agentd bench --scenarios soak --soak 60s --strict   # CI's soak",
		"agentd bench --database postgres://… --nodes 3 --scenarios soak",
	},
	exits: []string{"1  with --strict: a scenario saw errors, an unannounced SSE gap or a duplicate"},
}

func cmdBench(ctx context.Context, args []string) error {
	fs := newFlags("bench")
	url := fs.String("url", "", "server to measure, or comma-separated nodes of one cluster (default: start agentd with fakellm)")
	database := fs.String("database", "", "without --url: start the nodes on this database (postgres://…; default a fresh SQLite file)")
	nodes := fs.Int("nodes", 1, "without --url: how many nodes to start (more than one needs --database postgres://…)")
	model := fs.String("model", "fake/fake-model", "provider/model the server knows fakellm as")
	scen := fs.String("scenarios", "startup,ceiling,turn,concurrency,paced,status,fanout", "scenarios to run (also concurrency-async and paced-async: prompt_async with one shared event stream instead of a blocking request per turn)")
	turns := fs.Int("turns", 300, "turn: sequential prompts")
	sessions := fs.Int("sessions", 1000, "concurrency and paced: sessions at once")
	turnsEach := fs.Int("turns-each", 2, "concurrency and paced: turns per session")
	think := fs.Duration("think", 2*time.Second, "paced: the model's time before each of its answers")
	busy := fs.Int("busy", 100, "status: busy sessions")
	idle := fs.Int("idle", 900, "status: idle sessions created beside the busy ones")
	dur := fs.Duration("duration", 5*time.Second, "status and fanout: how long each runs")
	subs := fs.Int("subscribers", 100, "fanout: SSE subscribers")
	producers := fs.Int("producers", 8, "fanout: sessions producing events")
	soak := fs.Duration("soak", 30*time.Minute, "soak: how long")
	sample := fs.Duration("sample", time.Minute, "soak: how often to sample the server")
	soakWorkers := fs.Int("soak-workers", 8, "soak: client workers")
	dbPath := fs.String("db", "", "soak: the server's database file, to sample its size (when --url is given)")
	pid := fs.Int("pid", 0, "pid of the server, to sample its memory (when --url is given)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	baseline := fs.String("baseline", "", "compare with this earlier --json report and print the figures that got worse (never fails)")
	tolerance := fs.Float64("tolerance", 0.5, "with --baseline: how much worse a figure may get before it is printed (0.5: 50%)")
	providerTLS := fs.Bool("provider-tls", false, "without --url: serve fakellm over HTTPS with HTTP/2, as hosted providers are (agentd trusts its certificate through SSL_CERT_FILE)")
	against := fs.String("against", "", "startup: also measure these agentd binaries, NAME=PATH comma-separated (an earlier build), alternating with this one")
	startupRuns := fs.Int("startup-runs", 9, "startup: starts of each binary and reference program; figures are medians")
	strict := fs.Bool("strict", false, "exit 1 when a scenario saw errors, an unannounced SSE gap or a duplicate (for CI)")
	if _, err := parse(fs, benchHelp, args); err != nil {
		return err
	}
	ref, err := config.ParseModel(*model)
	if err != nil {
		return err
	}
	opts := bench.Options{URL: strings.TrimRight(*url, "/"), Model: ref, Turns: *turns, Sessions: *sessions, TurnsEach: *turnsEach, Think: *think,
		Busy: *busy, Idle: *idle, Duration: *dur, Subscribers: *subs, Producers: *producers, PID: *pid, Progress: os.Stderr,
		SoakDuration: *soak, Sample: *sample, SoakWorkers: *soakWorkers, DBPath: *dbPath}
	wantStartup := false
	var start startupFigures
	for _, s := range strings.Split(*scen, ",") {
		if s = strings.TrimSpace(s); s == "startup" {
			wantStartup = true
		} else if s != "" {
			opts.Scenarios = append(opts.Scenarios, s)
		}
	}
	if opts.URL == "" {
		if *nodes < 1 || (*nodes > 1 && !strings.HasPrefix(*database, "postgres")) {
			return fmt.Errorf("--nodes %d: several nodes share a PostgreSQL database (--database postgres://…)", *nodes)
		}
		srv, err := startBenchServer(ctx, *providerTLS)
		if err != nil {
			return err
		}
		defer srv.stop()
		if start, err = srv.measureStartup(ctx, wantStartup && *database == "", *against, *startupRuns); err != nil {
			return err
		}
		if err := srv.start(ctx, *database, *nodes); err != nil {
			return err
		}
		opts.URL = strings.Join(srv.urls, ",")
		if len(srv.cmds) == 1 {
			// Memory is sampled for a single node only.
			opts.PID = srv.cmds[0].Process.Pid
		}
		if *database == "" {
			opts.DBPath = filepath.Join(srv.dir, "agentd.db")
			opts.CeilingDir = srv.dir
		}
	} else if wantStartup {
		fmt.Fprintln(os.Stderr, "startup: skipped, the server was started elsewhere")
	}
	rep, err := bench.Run(ctx, opts)
	fmt.Fprint(os.Stderr, "\r\033[K")
	if err != nil {
		return err
	}
	start.addTo(&rep)
	printReport(rep)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if *baseline != "" {
		compareWith(*baseline, rep, *tolerance)
	}
	if *strict {
		for _, r := range rep.Results {
			if r.Errors > 0 || r.Figures["sse_gaps"] > 0 || r.Figures["sse_duplicates"] > 0 {
				return fmt.Errorf("%s: %d errors, %v unannounced SSE gaps, %v duplicates", r.Scenario, r.Errors, r.Figures["sse_gaps"], r.Figures["sse_duplicates"])
			}
		}
	}
	return nil
}

// compareWith prints how rep compares with the report in the file: a
// regression is news for a person, not a reason to fail a build on a
// machine whose timings move.
func compareWith(path string, rep bench.Report, tolerance float64) {
	var base bench.Report
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &base)
	}
	if err != nil {
		fmt.Printf("\nbaseline %s: %v\n", path, err)
		return
	}
	c := bench.Compare(base, rep, tolerance)
	fmt.Printf("\ncompared with %s (%s), timings as ratios to each run's references: ", path, base.Started)
	if len(c.Worse) == 0 {
		fmt.Printf("no figure worse by more than %.0f%%\n", 100*tolerance)
	} else {
		fmt.Printf("%d worse\n", len(c.Worse))
	}
	for _, l := range c.Worse {
		fmt.Println("  " + l)
	}
	if len(c.Unread) > 0 {
		fmt.Printf("  not compared, a reference is missing from one report: %s\n", strings.Join(c.Unread, ", "))
	}
}

func printReport(rep bench.Report) {
	fmt.Printf("target %s\n\n", rep.Target)
	printReferences(rep.References)
	fmt.Printf("%-12s %-28s %12s  %s\n", "scenario", "figure", "value", "against this machine's reference")
	fmt.Println(strings.Repeat("-", 78))
	for _, r := range rep.Results {
		keys := make([]string, 0, len(r.Figures))
		for k := range r.Figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("%-12s %-28s %12.1f  %s\n", r.Scenario, k, r.Figures[k], rep.References.Describe(r.Scenario, k, r.Figures[k]))
		}
		lk := make([]string, 0, len(r.Latency))
		for k := range r.Latency {
			lk = append(lk, k)
		}
		sort.Strings(lk)
		for _, k := range lk {
			l := r.Latency[k]
			fmt.Printf("%-12s %-28s %12s  %s\n", r.Scenario, k+" ms p50/p90/p99/max", fmt.Sprintf("%.2f/%.2f/%.2f/%.2f", l.P50, l.P90, l.P99, l.Max),
				atP99(rep.References.Describe(r.Scenario, "latency_ms", l.P99)))
		}
		fmt.Printf("%-12s %-28s %12d\n", r.Scenario, "errors", r.Errors)
		if r.Notes != "" {
			fmt.Printf("%-12s %s\n", r.Scenario, r.Notes)
		}
		if len(r.Samples) > 0 {
			fmt.Printf("\n%8s %10s %8s %11s %8s %9s\n", "minutes", "RSS MiB", "fds", "goroutines", "DB MiB", "actions")
			for _, s := range r.Samples {
				fmt.Printf("%8.1f %10.1f %8.0f %11.0f %8.1f %9d\n", s.Minutes, s.RSSMiB, s.FDs, s.Goroutines, s.DBMiB, s.Turns)
			}
			fmt.Println()
		}
	}
	if m := rep.Memory; m != nil {
		fmt.Printf("%-12s %-28s %12s\n", "memory", "RSS MiB before/peak/after", fmt.Sprintf("%.1f/%.1f/%.1f", m.Before, m.Peak, m.After))
	}
}

// benchServer is agentd started by the bench tool, with fakellm: one
// node, or several sharing a PostgreSQL database.
type benchServer struct {
	dir  string
	fake *http.Server
	cfg  string
	// env is added to the nodes' environment.
	env  []string
	cmds []*exec.Cmd
	urls []string
}

func startBenchServer(ctx context.Context, providerTLS bool) (*benchServer, error) {
	dir, err := os.MkdirTemp("", "agentd-bench-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &benchServer{dir: dir, fake: &http.Server{Handler: fakellm.New(fakellm.Options{}).Handler(), ReadHeaderTimeout: 10 * time.Second}}
	scheme := "http"
	if providerTLS {
		certPEM, cert, err := selfSigned()
		if err != nil {
			ln.Close()
			return nil, err
		}
		certFile := filepath.Join(dir, "provider.pem")
		if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
			ln.Close()
			return nil, err
		}
		// ServeTLS offers HTTP/2 by ALPN; the provider transport, a clone of
		// Go's default, takes it.
		s.fake.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.env = []string{"SSL_CERT_FILE=" + certFile}
		scheme = "https"
		go s.fake.ServeTLS(ln, "", "")
	} else {
		go s.fake.Serve(ln)
	}
	s.cfg = filepath.Join(dir, "agentd.json")
	// bash is allowed (it asks by default), and what it reads outside the workspace (ls /), for the soak's tool turns; the
	// event log keeps 100,000 events so that a soak reaches its plateau.
	cfg := `{"model":"fake/fake-model","permission":{"bash":"allow","external_directory":"allow"},"agentd":{"events":{"maxCount":100000}},` +
		`"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"` + scheme + `://` + ln.Addr().String() + `/v1"}}}}`
	return s, os.WriteFile(s.cfg, []byte(cfg), 0o644)
}

// selfSigned returns a day-long certificate for 127.0.0.1, in PEM and
// ready to serve.
func selfSigned() ([]byte, tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "agentd bench provider"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return certPEM, cert, err
}

func (s *benchServer) launch(db string, extra ...string) (*exec.Cmd, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(self, append([]string{"serve", "--port", strconv.Itoa(port), "--db", db, "--config", s.cfg, "--log-level", "error"}, extra...)...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	return cmd, "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// waitHealthy polls /global/health until it answers 200.
func waitHealthy(ctx context.Context, url string) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.Get(url + "/global/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("server at %s never became healthy", url)
}

func (s *benchServer) start(ctx context.Context, database string, nodes int) error {
	if database == "" {
		database = filepath.Join(s.dir, "agentd.db")
	}
	for i := range nodes {
		var extra []string
		if nodes > 1 {
			extra = []string{"--node", "bench" + strconv.Itoa(i)}
		}
		cmd, url, err := s.launch(database, extra...)
		if err != nil {
			return err
		}
		s.cmds, s.urls = append(s.cmds, cmd), append(s.urls, url)
		if err := waitHealthy(ctx, url); err != nil {
			return err
		}
	}
	return nil
}

func (s *benchServer) stop() {
	for _, cmd := range s.cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range s.cmds {
		_ = cmd.Wait()
	}
	_ = s.fake.Close()
	_ = os.RemoveAll(s.dir)
}
