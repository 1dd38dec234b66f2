// Package app assembles agentd: store, event hub, engine and HTTP API, with
// one lifecycle. The CLI's serve command and the end-to-end tests both use
// it, so what is tested is what runs.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/budget"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/credential"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/llm/scripted"
	"github.com/agentd/agentd/internal/lockfile"
	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/schedule"
	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/skill"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/store/postgres"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/tool/builtin"
	"github.com/agentd/agentd/internal/webhook"
	"github.com/agentd/agentd/internal/worktree"
	"go.opentelemetry.io/otel/trace"
)

// Config is everything needed to run one agentd node.
type Config struct {
	// DBPath is the SQLite database file, or a postgres:// URL: then
	// several nodes may share the database (see Node and Lease*).
	DBPath string
	// Node names this node in run leases; random when empty.
	Node string
	// SQLiteSynchronous overrides synchronous=FULL (tests, benchmarks).
	SQLiteSynchronous string
	// SQLiteCheckpointEvery overrides how often the WAL is checkpointed
	// (tests whose full disk must stay full for the WAL too).
	SQLiteCheckpointEvery time.Duration
	// Host and Port to listen on; Port 0 picks a free port.
	Host string
	Port int
	// Version is reported by /global/health and stored on sessions.
	Version string
	// Directory is the default workspace of new sessions.
	Directory string
	Security  server.Security
	Heartbeat time.Duration
	// LiveWindow overrides how far back /event streams opened without a
	// cursor start (default 300 ms; tests that time the window).
	LiveWindow time.Duration
	Engine     engine.Config
	// Models resolves model references; nil means only agentd/scripted.
	Models *llm.Registry
	// Tools offered to models; nil means the built-in set.
	Tools *tool.Registry
	// EventMaxAge and EventMaxCount bound the event log (0: defaults of
	// 7 days and 1,000,000 events).
	EventMaxAge   time.Duration
	EventMaxCount int
	Logger        *slog.Logger
	// Catalog describes the models and configuration to opencode's
	// clients; nil means one built from an empty configuration.
	Catalog *server.Catalog
	// Credentials keeps the keys clients give (PUT /auth/{id}); nil: the
	// file at CredentialsFile, moved into the database on PostgreSQL
	// (shareCredentials).
	Credentials *credential.Store
	// CredentialsFile is the credential file of a SQLite database, or the
	// one a PostgreSQL node imports at start; "": CredentialsFile(DBPath).
	CredentialsFile string
	// TLSCert and TLSKey, when set, serve HTTPS.
	TLSCert, TLSKey string
	// Commands are the configuration's custom commands; CommandDirs the
	// directories of command files (default: agentd's global one, then the
	// workspace's .opencode/command and .agentd/command). The
	// configuration's commands win over files of the same name.
	Commands    command.Set
	CommandDirs []string
	// SkillDirs are the folders of the user's skills (nil: ~/.claude/skills,
	// ~/.agents/skills and agentd's configuration folder's skill and
	// skills; see skill.GlobalFolders); WorktreeDir holds the git worktrees
	// agentd makes (default: agentd-worktree beside agentd's data folder).
	SkillDirs   []string
	WorktreeDir string
	// ProjectCommandAgents are the agents a project's command file may
	// name (nil: command.DefaultProjectAgents; see Apply).
	ProjectCommandAgents []string
	// MCP are the MCP servers to connect, by name; MCPLazy connects them
	// when a run first needs tools instead of at start.
	MCP     map[string]mcp.Server
	MCPLazy bool
	// MCPAdd is agentd.mcp.add: "remote" lets clients add remote MCP
	// servers at run time (POST /mcp); anything else refuses every add.
	MCPAdd string
	// WebFetchAllow lists the networks the webfetch tool may reach although
	// they are on this machine or private (agentd.webfetch.allow).
	WebFetchAllow []netip.Prefix
	// MaxConns bounds the connections served at once (default: as many
	// as the open-file limit allows, less a reserve; see connLimit).
	MaxConns int
	// BodyTimeout bounds the reading of a request's body (default 30 s).
	BodyTimeout time.Duration
	// Pprof serves Go's profiles under /debug/pprof/.
	Pprof bool
	// AccessLog logs every request at info.
	AccessLog bool
	// Tracer records spans of requests, runs, steps, model and tool calls
	// (nil: tracing is off).
	Tracer trace.Tracer
	// Snapshot are the options of the snapshot store Start makes when
	// Engine.Snapshots is nil; an empty Dir is beside a SQLite database,
	// or under the user's data directory for PostgreSQL (snapshotDir).
	Snapshot snapshot.Options
	// Sandbox confines the commands run for the model (the zero value:
	// Landlock where the kernel has it); ConfigFiles are the configuration
	// files read, which it hides from them (see startSandbox).
	Sandbox     sandbox.Config
	ConfigFiles []string
	Terminals   Terminals // terminals for clients (agentd.terminal), off unless Enabled
	Plugins     Plugins   // opencode's plugins, run by a host process when Specs lists any
	// Schedules tunes the scheduler (tests give it their clock).
	Schedules schedule.Config
	// Webhooks sends signed webhooks (agentd.webhooks); off without a secret.
	Webhooks webhook.Config
}

// App is a running agentd node.
type App struct {
	cfg    Config
	Store  store.Store
	Hub    *events.Hub
	Engine *engine.Engine
	API    *server.Server
	// Metrics are the node's metrics, served at /metrics.
	Metrics *metrics.Metrics
	// Schedules fires the schedules (POST /schedule) on this node.
	Schedules *schedule.Scheduler

	ln      net.Listener
	lock    *lockfile.Lock
	reaper  *builtin.Reaper
	mcp     *mcp.Manager
	plugins *plugin.Host
	live    *liveProviders
	terms   *terminals
	hooks   *webhook.Service
	http    *http.Server
	baseCtx context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	stopErr error
}

// Start opens the store, recovers runs, and starts serving. By the time it
// returns, status reflects the store and the listener accepts requests.
func Start(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EventMaxAge == 0 {
		cfg.EventMaxAge = 7 * 24 * time.Hour
	}
	if cfg.EventMaxCount == 0 {
		cfg.EventMaxCount = 1_000_000
	}
	if cfg.Models == nil {
		cfg.Models = llm.NewRegistry()
	}
	if _, _, err := cfg.Models.Resolve(scriptedRef); err != nil {
		cfg.Models.Add(scripted.ProviderID, &scripted.Model{}, nil)
	}
	if ref := cfg.Engine.DefaultModel; ref.ProviderID != "" {
		if _, _, err := cfg.Models.Resolve(ref); err != nil {
			return nil, fmt.Errorf("default model %s/%s: %w", ref.ProviderID, ref.ModelID, err)
		}
	}
	if cfg.Tools == nil {
		cfg.Tools = tool.NewRegistry(builtin.All()...)
	}
	// This node's tools: the configured ones, a webfetch that reaches what
	// the operator opened, and the MCP servers' (connected below).
	tools := tool.NewRegistry(cfg.Tools.All()...)
	if len(cfg.WebFetchAllow) > 0 {
		tools.Add(builtin.WebFetch{Allow: cfg.WebFetchAllow})
	}
	mcps := mcp.New(mcp.Options{Servers: cfg.MCP, Version: cfg.Version, Logger: cfg.Logger, Lazy: cfg.MCPLazy})
	tools.AddSource(mcps)
	cfg.Engine.Logger = cfg.Logger
	if cfg.Engine.Agents == nil {
		cfg.Engine.Agents = agent.NewSet(agent.Builtins())
	}

	commands, err := loadCommands(cfg)
	if err != nil {
		return nil, err
	}
	skills := &skill.Catalog{Global: skillDirs(cfg), Logger: cfg.Logger}
	tools.Add(skill.Tool{Catalog: skills})

	ln, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			ln.Close()
		}
	}()
	db, lock, node, err := openStore(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	if err := shareCredentials(ctx, &cfg, db); err != nil {
		db.Close()
		return nil, err
	}
	// Every writer (engine and API) goes through one watcher, so that a
	// full disk is logged once when it starts and once when it ends.
	st := store.Watch(db, cfg.Logger.With("component", "store"))
	met := metrics.New()
	met.BuildInfo(cfg.Version)
	st.ObserveTx(met.StoreTx)
	if b, ok := db.(interface{ SetBatchObserver(func(int)) }); ok {
		b.SetBatchObserver(met.CommitBatch)
	}
	if w, ok := db.(metrics.WritePath); ok {
		met.ObserveWritePath(w)
		cfg.Engine.WriteQueue = w.Waiting
	}
	cfg.Engine.Metrics, cfg.Engine.Tracer = met, cfg.Tracer
	if cfg.Engine.OutputDir == "" {
		dir, err := outputDir(cfg.DBPath, node)
		if err != nil {
			st.Close()
			lock.Release()
			return nil, err
		}
		cfg.Engine.OutputDir = dir
	}
	if cfg.Engine.Snapshots == nil {
		o := cfg.Snapshot
		if o.Dir == "" {
			o.Dir = snapshotDir(cfg.DBPath, node)
		}
		cfg.Engine.Snapshots = snapshot.New(o)
	}
	sb, sandboxed, err := startSandbox(cfg)
	if err != nil {
		st.Close()
		lock.Release()
		return nil, err
	}
	cfg.Engine.Sandbox = sb
	// Tool processes a previous process on this database (and, for a
	// shared database, this address) left behind (it was killed) are ended
	// before its runs are recovered.
	cfg.Engine.ToolScope = toolScope(cfg.DBPath, node)
	// The reaper ends this node's tool processes if it dies, and holds the
	// database's lock until it has. It starts, after the sweep of what a
	// previous process left, beside the rest of start-up (startup.go).
	var keep []*os.File
	if lock != nil {
		keep = append(keep, lock.File())
	}
	housekeeping := startToolHousekeeping(cfg.Engine.ToolScope, keep, cfg.Logger)
	// From here on, failures release what was taken in reverse order.
	// The MCP servers connect in the background.
	mcps.Start(ctx)
	release := func() { mcps.Stop(); st.Close(); housekeeping.stop(); lock.Release() }
	_, last, err := st.EventBounds(ctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("read event log: %w", err)
	}
	var serverURL atomic.Value
	serverURL.Store((&App{cfg: cfg, ln: ln}).URL()) // the config hooks' instance is made before serving
	plugins, err := startPlugins(ctx, &cfg, tools, &serverURL)
	if err != nil {
		release()
		return nil, err
	}
	release = func() { plugins.Stop(); mcps.Stop(); st.Close(); housekeeping.stop(); lock.Release() }
	pluginConfig(ctx, &cfg, plugins, commands)
	hub := events.NewHub(st, last, 0)
	var committed func(int64) bool
	if c, ok := st.Store.(interface{ Committed(seq int64) bool }); ok {
		committed = c.Committed
	}
	toPlugins := pluginEvents(plugins, committed)
	st.SetCommitHook(func(evs []core.Event) { hub.Publish(evs); toPlugins(evs) })
	if plugins != nil {
		hub.OnLive(plugins.Live)
	}
	met.Register(metrics.NewStateCollector(stateReader{st: st, hub: hub}, 5*time.Second))
	met.Init(knownLabels(cfg, tools))
	if cfg.Engine.Budget == nil {
		cfg.Engine.Budget = budget.New(st)
	}
	keys := access.New(st)
	eng := engine.New(st, hub, cfg.Models, tools, cfg.Engine)
	// Recovery may resume runs and their tools: what a previous process
	// left running is ended, and the reaper runs, first.
	reaper, err := housekeeping.wait()
	if err != nil {
		release()
		return nil, err
	}
	if err := eng.Start(ctx); err != nil {
		release()
		return nil, err
	}
	hooks, err := startWebhooks(ctx, cfg, db, st, hub, met, node.id)
	if err != nil {
		eng.Stop()
		release()
		return nil, err
	}
	if cfg.Catalog == nil {
		def := cfg.Engine.DefaultModel
		if def.ProviderID == "" {
			def = scriptedRef
		}
		c := Catalog(config.File{}, def, cfg.Engine.Permission, cfg.Engine.Agents.All())
		cfg.Catalog = &c
	}
	// The plugins' client needs the address before the providers' set-up.
	serverURL.Store((&App{cfg: cfg, ln: ln}).URL())
	live := startProviders(ctx, plugins, &cfg)
	cfg.Catalog.Providers = live.Providers()
	terms := startTerminals(ctx, cfg, sb, hub)
	sched := schedule.New(st, eng, cfg.Schedules, cfg.Logger, cfg.Version)
	api := server.New(st, eng, hub, server.Config{
		Version: cfg.Version, Directory: cfg.Directory, Security: cfg.Security,
		Heartbeat: cfg.Heartbeat, LiveWindow: cfg.LiveWindow, Logger: cfg.Logger, Catalog: *cfg.Catalog, Paths: paths(cfg.DBPath),
		Pprof: cfg.Pprof, AccessLog: cfg.AccessLog, Node: server.NodeInfo{ID: node.id, Database: node.kind, Leases: eng.Leases, Sandbox: sandboxed, Cluster: clusterOf(db)},
		Commands: commands, MCP: mcps, MCPAdd: cfg.MCPAdd, Metrics: met.Handler(), Tracer: cfg.Tracer, BodyTimeout: cfg.BodyTimeout,
		Unhealthy: st.Lost, Terminals: terminalService(terms), CommandHook: commandHook(plugins), ObserveRequest: met.Request,
		Skills: skills, Worktrees: &worktree.Manager{Root: worktreeDir(cfg)}, Callbacks: callbacksOf(hooks), Keys: keys,
		Schedules: sched, ProviderAuth: providerAuth(plugins), LiveProviders: live.Providers,
	})
	mountV2(api, st, eng, hub, cfg, commands, skills, terminalService(terms), hooks, keys)
	met.InitRoutes(api.Routes())
	nofile := raiseFileLimit()
	if n := connLimit(cfg.MaxConns, nofile); n != cfg.MaxConns {
		if cfg.MaxConns > 0 {
			cfg.Logger.Warn("--max-conns lowered to what the open-file limit allows", "asked", cfg.MaxConns, "max_conns", n, "nofile", nofile)
		}
		cfg.MaxConns = n
	}
	ln = &capListener{Listener: ln, max: int64(cfg.MaxConns)}
	a := &App{cfg: cfg, Store: st, Hub: hub, Engine: eng, API: api, Metrics: met, ln: ln, lock: lock, mcp: mcps, reaper: reaper, terms: terms, hooks: hooks, plugins: plugins, live: live,
		Schedules: sched}
	serverURL.Store(a.URL())
	_ = lock.Describe(a.URL())
	a.baseCtx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	a.http = &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return a.baseCtx },
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	// Ticks fire once the node serves; the scheduler stops before the
	// engine does.
	_ = sched.Start(a.baseCtx)
	a.wg.Add(3)
	go func() {
		defer a.wg.Done()
		a.watchDatabase(st)
	}()
	go func() {
		defer a.wg.Done()
		serve := func() error { return a.http.Serve(ln) }
		if cfg.TLSCert != "" {
			serve = func() error { return a.http.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey) }
		}
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Logger.Error("http server", "err", err)
		}
	}()
	go func() {
		defer a.wg.Done()
		a.prune()
	}()
	started = true
	return a, nil
}

// nodeDesc is what the app knows of its node once the store is open.
type nodeDesc struct {
	id, kind, addr string
}

// IsPostgres reports whether a --db value names a PostgreSQL database.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openStore opens the database. A SQLite file is owned by one process: a
// second one refuses to start, naming the first, instead of recovering the
// same runs twice. A PostgreSQL database is shared by nodes through run
// leases; the engine gets the store's lease side.
func openStore(ctx context.Context, cfg *Config) (store.Store, *lockfile.Lock, nodeDesc, error) {
	if IsPostgres(cfg.DBPath) {
		pg, err := postgres.Open(ctx, cfg.DBPath, postgres.Options{Node: cfg.Node, Logger: cfg.Logger})
		if err != nil {
			return nil, nil, nodeDesc{}, fmt.Errorf("open postgres: %w", err)
		}
		cfg.Engine.Leaser = pg
		cfg.Logger.Info("node joined the shared database", "node", pg.Node())
		return pg, nil, nodeDesc{id: pg.Node(), kind: "postgres", addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}, nil
	}
	if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o700); err != nil {
		return nil, nil, nodeDesc{}, fmt.Errorf("create data directory: %w", err)
	}
	lock, err := lockfile.Acquire(cfg.DBPath)
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, nil, nodeDesc{}, fmt.Errorf("database %s is in use (%w); stop that server or use another --db", cfg.DBPath, err)
	}
	if err != nil {
		return nil, nil, nodeDesc{}, err
	}
	// From here on the database is named by its real path, so that its
	// journal, the tools' scope and the lock agree whatever path led to it.
	cfg.DBPath = lock.Path()
	db, err := sqlite.Open(ctx, cfg.DBPath, sqlite.Options{Synchronous: cfg.SQLiteSynchronous, CheckpointEvery: cfg.SQLiteCheckpointEvery})
	if err != nil {
		lock.Release()
		return nil, nil, nodeDesc{}, err
	}
	id := cfg.Node
	if id == "" {
		id = "local"
	}
	return db, lock, nodeDesc{id: id, kind: "sqlite"}, nil
}

// paths are the directories reported to clients: the user's home, the
// directory of the database and agentd's configuration directory.
func paths(dbPath string) server.Paths {
	if IsPostgres(dbPath) {
		dbPath = filepath.Join(os.TempDir(), "agentd", "db")
		if d, err := os.UserCacheDir(); err == nil {
			dbPath = filepath.Join(d, "agentd", "db")
		}
	}
	p := server.Paths{State: filepath.Dir(dbPath)}
	if abs, err := filepath.Abs(p.State); err == nil {
		p.State = abs
	}
	p.Home, _ = os.UserHomeDir()
	if d, err := os.UserConfigDir(); err == nil {
		p.Config = filepath.Join(d, "agentd")
	}
	return p
}

// URL is the base URL the node listens on.
func (a *App) URL() string {
	if a.cfg.TLSCert != "" {
		return "https://" + a.ln.Addr().String()
	}
	return "http://" + a.ln.Addr().String()
}

// Addr is the listener's address.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// databaseCheck is how often a node checks that its SQLite file is still
// the one at its path.
const databaseCheck = 2 * time.Second

// watchDatabase refuses writes (and turns health to unhealthy) once the
// database file was deleted or replaced under the server: what it wrote
// would not be found after a restart.
func (a *App) watchDatabase(st *store.Watched) {
	if a.lock == nil {
		return
	}
	t := time.NewTicker(databaseCheck)
	defer t.Stop()
	for {
		select {
		case <-a.baseCtx.Done():
			return
		case <-t.C:
		}
		if err := a.lock.Check(); err != nil {
			st.Refuse(err)
			return
		}
	}
}

// prune enforces event retention until the app stops.
func (a *App) prune() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		cutoff := time.Now().Add(-a.cfg.EventMaxAge).UnixMilli()
		if n, err := a.Store.PruneEvents(a.baseCtx, cutoff, a.cfg.EventMaxCount); err != nil && a.baseCtx.Err() == nil {
			a.cfg.Logger.Warn("prune events", "err", err)
		} else if n > 0 {
			a.cfg.Logger.Debug("pruned events", "count", n)
		}
		select {
		case <-a.baseCtx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop shuts the node down gracefully: in-flight requests and event streams
// end, runs stop at a safe boundary and stay resumable, and the store is
// closed cleanly. It is idempotent.
func (a *App) Stop(ctx context.Context) error {
	a.once.Do(func() {
		a.http.SetKeepAlivesEnabled(false)
		a.cancel()
		a.terms.Stop() // its websockets are hijacked connections, which Shutdown does not wait for
		a.Schedules.Stop()
		a.hooks.Stop()
		a.Engine.Stop()
		a.live.Stop()
		a.plugins.Stop()
		a.mcp.Stop()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := a.http.Shutdown(sctx)
		if err != nil {
			err = errors.Join(err, a.http.Close())
		}
		a.wg.Wait()
		a.stopErr = errors.Join(err, a.Store.Close(), a.reaper.Stop())
		a.lock.Release()
	})
	return a.stopErr
}

// knownLabels are the models and tools whose metrics exist from the start.
func knownLabels(cfg Config, tools *tool.Registry) metrics.Known {
	var k metrics.Known
	def := cfg.Engine.DefaultModel
	if def.ProviderID == "" {
		def = scriptedRef
	}
	k.Models = append(k.Models, [2]string{def.ProviderID, def.ModelID})
	if s := cfg.Engine.SmallModel; s != nil && *s != def {
		k.Models = append(k.Models, [2]string{s.ProviderID, s.ModelID})
	}
	for _, t := range tools.All() {
		k.Tools = append(k.Tools, t.Name())
	}
	return k
}
