package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/tracing"
)

// defaultDBPath is agentd.db under the user's data directory.
func defaultDBPath() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "agentd", "agentd.db")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "agentd", "agentd.db")
	}
	return "agentd.db"
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

var serveHelp = help{
	usage: "serve [flags]",
	about: `Runs the server: opencode's session API and agentd's own, the dashboard (/ui), the
API document (/doc) and Prometheus metrics (/metrics). It reads agentd.json from the
user's configuration directory, then the working directory, then --config; an
OPENAI_API_KEY or ANTHROPIC_API_KEY enables that provider. With no provider the model
is agentd/scripted, an offline model driven by directives such as reply:TEXT.`,
	maxArgs: 0,
	examples: []string{
		"agentd serve                               # 127.0.0.1:4096, ~/.local/share/agentd/agentd.db",
		"agentd serve --port 0 --db /tmp/x.db       # a free port, a scratch database",
		"agentd serve --print-config                # the merged configuration, then exit",
		"AGENTD_SERVER_PASSWORD=s agentd serve --hostname 0.0.0.0   # reachable from other machines",
		"agentd serve --db postgres://u:p@db/agentd --node a        # one node of several",
	},
	env: []string{
		"OPENAI_API_KEY, ANTHROPIC_API_KEY   enable openai/<model>, anthropic/<model>",
		"AGENTD_DATABASE_URL      the database when --db is not given (postgres://… for several nodes)",
		"AGENTD_SERVER_PASSWORD   require HTTP basic auth (needed to listen beyond loopback)",
		"AGENTD_SERVER_USERNAME   the basic auth user (default opencode)",
		"XDG_CONFIG_HOME, XDG_DATA_HOME   where the global agentd.json and the database live",
		"OTEL_EXPORTER_OTLP_ENDPOINT      export traces (see docs/operations.md)",
	},
	exits: []string{"0  stopped by SIGINT or SIGTERM after a clean shutdown"},
}

func cmdServe(ctx context.Context, args []string) error {
	fs := newFlags("serve")
	host := fs.String("hostname", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 4096, "port to listen on (0 picks a free one)")
	db := fs.String("db", defaultDBPath(), "SQLite database file, or postgres://… shared by several nodes (default $AGENTD_DATABASE_URL when set)")
	node := fs.String("node", "", "this node's id in run leases (shared database; default random)")
	leaseTTL := fs.Duration("lease-ttl", 15*time.Second, "shared database: how long a run stays this node's without renewal")
	leaseRenew := fs.Duration("lease-renew", 5*time.Second, "shared database: how often this node renews its leases")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logFormat := fs.String("log-format", "text", "log format: text or json (one JSON object per line)")
	resume := resumeFlag(config.ResumeOn)
	fs.Var(&resume, "resume", "resume runs cut off by a crash or restart (false: end them interrupted; paused: wait for POST /session/{id}/resume)")
	maxSteps := fs.Int("max-steps", 0, "steps after which a run ends failed/max_steps (default 50)")
	configPath := fs.String("config", "", "configuration file (agentd.json, opencode keys)")
	cors := fs.String("cors", "", "browser origins allowed besides the server's own, comma-separated")
	tlsCert := fs.String("tls-cert", "", "certificate file: serve HTTPS (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "private key file of --tls-cert")
	maxConns := fs.Int("max-conns", 0, "connections served at once; more are answered 503 (0: what the open-file limit allows, less a reserve)")
	pprofOn := fs.Bool("pprof", false, "serve Go's profiles under /debug/pprof/")
	accessLog := fs.Bool("access-log", true, "log every request at info (method, path, status, duration, bytes, client)")
	printConfig := fs.Bool("print-config", false, "print the merged configuration (secrets hidden) and exit")
	if _, err := parse(fs, serveHelp, args); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr, *logFormat, *level)
	if err != nil {
		return err
	}
	sec, err := securityFromEnv(*host)
	if err != nil {
		return err
	}
	for _, o := range strings.Split(*cors, ",") {
		if o = strings.TrimSpace(o); o != "" {
			sec.Origins = append(sec.Origins, o)
		}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together")
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	if u := os.Getenv("AGENTD_DATABASE_URL"); u != "" && !flagSet(fs, "db") {
		*db = u
	}
	if *leaseRenew >= *leaseTTL {
		return fmt.Errorf("--lease-renew %s must be shorter than --lease-ttl %s", *leaseRenew, *leaseTTL)
	}
	if *maxSteps < 0 || *maxConns < 0 {
		return fmt.Errorf("--max-steps and --max-conns take a positive number (0: the default)")
	}
	setup := app.Setup{Workspace: wd, ConfigFile: *configPath, GlobalDir: app.DefaultGlobalDir()}
	if *printConfig {
		return printMergedConfig(setup)
	}
	cfg, loaded, err := app.Configure(setup, app.Config{
		DBPath: *db, Node: *node, Host: *host, Port: *port, Version: version,
		Security: sec, Logger: log, TLSCert: *tlsCert, TLSKey: *tlsKey, MaxConns: *maxConns, Pprof: *pprofOn,
		AccessLog: *accessLog,
	})
	if err != nil {
		return err
	}
	if flagSet(fs, "resume") {
		cfg.Engine.Resume, cfg.Engine.Pause.Server = resume != resumeFlag(config.ResumeOff), resume == resumeFlag(config.ResumePaused)
	}
	cfg.Engine.LeaseTTL, cfg.Engine.LeaseRenew = *leaseTTL, *leaseRenew
	// The test suites' check that a run's kept transcript is the store's
	// (engine.Config.CheckHistory), for the binaries they start.
	cfg.Engine.CheckHistory = os.Getenv("AGENTD_CHECK_HISTORY") == "1"
	if *maxSteps > 0 {
		cfg.Engine.MaxSteps = *maxSteps
	}
	tp, err := tracing.FromEnv(ctx, version)
	if err != nil {
		return err
	}
	if tp != nil {
		cfg.Tracer = tp.Tracer()
		defer func() {
			// Spans still buffered are sent before the process exits.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				log.Warn("flush traces", "err", err)
			}
		}()
		log.Info("tracing on: spans are exported over OTLP/HTTP as the OTEL_* variables say")
	}
	start := time.Now()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	u := a.URL()
	log.Info("agentd listening", "url", u, "dashboard", u+"/ui", "doc", u+"/doc", "metrics", u+"/metrics",
		"db", redactDB(cfg.DBPath), "version", version, "startup", time.Since(start).Round(time.Millisecond))
	if len(loaded.Used) > 0 {
		log.Info("configuration", "files", strings.Join(loaded.Used, ", "))
	}
	for _, w := range loaded.Warnings {
		log.Warn("configuration: ignored", "file", w.File, "line", w.Line, "key", w.Key, "why", w.Msg)
	}
	def := cfg.Engine.DefaultModel
	if def.ProviderID == "agentd" {
		log.Info("model: agentd/scripted, the offline model driven by directives such as reply:TEXT; " +
			"for a real one set OPENAI_API_KEY or ANTHROPIC_API_KEY, or add a provider block and \"model\": \"provider/model\" to agentd.json (see docs/providers.md)")
	} else {
		log.Info("model", "default", def.ProviderID+"/"+def.ModelID, "providers", strings.Join(cfg.Models.Providers(), ", "))
	}
	<-ctx.Done()
	log.Info("shutting down: new requests are refused, running runs stop at their next safe point")
	stopping := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.Stop(sctx); err != nil {
		return err
	}
	log.Info("stopped", "took", time.Since(stopping).Round(time.Millisecond))
	return nil
}

// newLogger is the server's logger: text (logfmt) or JSON lines, at a
// level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", format)
}

// securityFromEnv builds the access policy: a password from the
// environment enables basic auth; a non-loopback address requires one.
func securityFromEnv(host string) (server.Security, error) {
	sec := server.Security{
		Password: firstEnv("AGENTD_SERVER_PASSWORD", "OPENCODE_SERVER_PASSWORD"),
		Username: firstEnv("AGENTD_SERVER_USERNAME", "OPENCODE_SERVER_USERNAME"),
	}
	// Loopback by what the name resolves to, not by its spelling.
	loop := server.ResolvesToLoopback(host)
	sec.LoopbackOnly = loop
	if !loop && sec.Password == "" {
		return sec, fmt.Errorf("refusing to listen on %s without a password: set AGENTD_SERVER_PASSWORD (HTTP basic auth), or listen on 127.0.0.1", host)
	}
	return sec, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

func serverSecurityLoopback() server.Security { return server.Security{LoopbackOnly: true} }

// resumeFlag is --resume: true, false or paused; --resume alone is true.
type resumeFlag config.Resume

func (r *resumeFlag) String() string { return string(*r) }

// IsBoolFlag lets --resume stand alone, as when it was a boolean.
func (r *resumeFlag) IsBoolFlag() bool { return true }

func (r *resumeFlag) Set(s string) error {
	v, err := config.ParseResume(s)
	*r = resumeFlag(v)
	return err
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// redactDB hides a database URL's password from logs.
func redactDB(db string) string {
	u, err := url.Parse(db)
	if err != nil || u.User == nil {
		return db
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
