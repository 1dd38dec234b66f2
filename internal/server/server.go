// Package server is agentd's HTTP API: opencode's session routes (so that
// existing clients work unchanged) plus agentd's own status, wait, run and
// event routes. Handlers translate between HTTP and the engine and store;
// they hold no state of their own.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/access"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/engine"
	"github.com/agentd/agentd/internal/events"
	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/metrics"
	"github.com/agentd/agentd/internal/plugin"
	"github.com/agentd/agentd/internal/pty"
	"github.com/agentd/agentd/internal/schedule"
	"github.com/agentd/agentd/internal/skill"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tuictl"
	"github.com/agentd/agentd/internal/ui"
	gitwt "github.com/agentd/agentd/internal/worktree"
	"go.opentelemetry.io/otel/trace"
)

// Config configures the API.
type Config struct {
	Version string
	// Directory is the default workspace of new sessions.
	Directory string
	Security  Security
	// BodyLimit caps request bodies; default 10 MiB.
	BodyLimit int64
	// BodyTimeout bounds the reading of a request's body; default 30 s.
	BodyTimeout time.Duration
	// Heartbeat is the SSE heartbeat interval; default 10 s.
	Heartbeat time.Duration
	// LiveWindow is how far back an event stream opened without a cursor
	// starts (events.StreamOptions.LiveWindow); default 300 ms.
	LiveWindow time.Duration
	Logger     *slog.Logger
	// Catalog and Paths feed opencode's discovery routes.
	Catalog Catalog
	// LiveProviders, when set, gives the providers' list at each request
	// in place of Catalog.Providers: it follows the logins and keys
	// clients store while the server runs.
	LiveProviders func() []Provider
	// ProviderAuth serves the providers' logins plugins offer (nil: none).
	ProviderAuth ProviderAuth
	Paths        Paths
	// Pprof serves Go's profiles under /debug/pprof/ (behind the same
	// security as every route).
	Pprof bool
	// Node describes this node to GET /node.
	Node NodeInfo
	// MCP reports the MCP servers' states to GET /mcp (nil: none); a
	// manager that can also add, connect and disconnect servers (as
	// *mcp.Manager does) serves the MCP management routes.
	MCP interface{ Statuses() map[string]mcp.Status }
	// MCPAdd is agentd.mcp.add: "remote" lets clients add remote MCP
	// servers (POST /mcp); anything else refuses every add.
	MCPAdd string
	// Commands resolve the commands of a directory, for GET /command and
	// POST /session/{id}/command (nil: the built-in ones only).
	Commands *command.Catalog
	// Skills resolve the skills of a directory, for GET /skill and as
	// commands (nil: none).
	Skills *skill.Catalog
	// Worktrees makes and removes the git worktrees of projects (nil: it
	// lists them but makes none).
	Worktrees *gitwt.Manager
	// Metrics serves GET /metrics (nil: the process's own metrics only).
	Metrics http.Handler
	// Tracer, when set, records a span per request (see traced).
	Tracer trace.Tracer
	// AccessLog logs every request at info (see observe).
	AccessLog bool
	// ObserveRequest, when set, is told of every answered request: its
	// method, route pattern, status and duration (the request metrics).
	ObserveRequest func(method, route string, status int, d time.Duration)
	// Unhealthy, when set, says why the node cannot serve as it should
	// (nil while it can); GET /global/health reports it.
	Unhealthy func() error
	// Terminals serves the /pty routes (nil: terminals are off, and
	// those routes refuse with 403).
	Terminals pty.Service
	// Schedules serves the /schedule routes (nil: they answer 503).
	Schedules *schedule.Scheduler
	// CommandHook is the plugins' command.execute.before (nil: none): a
	// custom command's prompt parts, changed in place before admission.
	CommandHook func(ctx context.Context, dir, sessionID, name, args string, parts any) error
	// Callbacks keeps prompts' callbackUrl (nil: a prompt that carries
	// one is refused).
	Callbacks Callbacks
	// Keys are the API keys: bearer tokens authenticate beside the
	// password, and a key sees only what it may (nil: no keys).
	Keys *access.Keys
}

// NodeInfo describes the node serving the API: its id, its database kind
// ("sqlite" or "postgres"), a count of the run leases it holds and its
// sandbox.
type NodeInfo struct {
	ID       string
	Database string
	Leases   func() int
	// Sandbox says what confines the commands run for the model.
	Sandbox string
	// Cluster lists the nodes sharing the database, where they do (nil
	// on SQLite: the node is alone).
	Cluster func(context.Context) ([]ClusterNode, error)
}

// ClusterNode is one node connected to a shared database.
type ClusterNode struct {
	// ID is the node's id, the owner named in its leases.
	ID string `json:"id"`
	// Since is when the node connected.
	Since time.Time `json:"since"`
	// Leases is how many runs it holds a live lease on.
	Leases int `json:"leases"`
}

// Server serves the API.
type Server struct {
	cfg Config
	st  store.Store
	eng *engine.Engine
	hub *events.Hub
	log *slog.Logger

	routes  []route
	mounts  map[string]Route // routes of other packages, by "METHOD pattern" (see Mount)
	mux     *http.ServeMux
	started time.Time
	dirs    dirCache
	// tui queues the requests made of TUIs for GET /tui/control/next.
	tui *tuictl.Queue
	// logWindow caps the rate of clients' log lines (POST /log).
	logWindow window
}

// route is one method on one path; the table drives both the mux and the
// OpenAPI document, so the two cannot drift apart.
type route struct {
	method  string
	pattern string
	summary string
	native  bool // agentd's own route, not opencode's
	h       func(w http.ResponseWriter, r *http.Request) *apiError
}

// New builds the API over a started engine.
func New(st store.Store, eng *engine.Engine, hub *events.Hub, cfg Config) *Server {
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 10 << 20
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Commands == nil {
		cfg.Commands = &command.Catalog{}
	}
	if cfg.Worktrees == nil {
		cfg.Worktrees = &gitwt.Manager{}
	}
	if cfg.Metrics == nil {
		// A server built without the node's metrics still reports the
		// process's own.
		cfg.Metrics = metrics.New().Handler()
	}
	s := &Server{cfg: cfg, st: st, eng: eng, hub: hub, log: cfg.Logger.With("component", "http"), started: time.Now(),
		tui: tuictl.New(0, 0, nil)}
	s.routes = []route{
		{"GET", "/global/health", "Report that the server is up, with its version.", false, s.health},
		{"GET", "/event", "Stream events (SSE); replay with Last-Event-ID or ?after=.", false, s.eventStream},
		{"GET", "/global/event", "Stream events wrapped with their directory (SSE).", false, s.globalEventStream},
		{"GET", "/session", "List sessions, most recently updated first.", false, s.listSessions},
		{"POST", "/session", "Create a session.", false, s.createSession},
		{"GET", "/session/status", "Statuses of sessions that have a non-terminal run (opencode's shape).", false, s.listStatus},
		{"GET", "/session/active", "Full statuses (run, phase, since) of sessions that have a non-terminal run.", true, s.listActive},
		{"GET", "/session/{id}", "Get a session.", false, s.getSession},
		{"PATCH", "/session/{id}", "Update a session's title, metadata, or agentd's resume and asks settings.", false, s.updateSession},
		{"DELETE", "/session/{id}", "Delete a session, aborting its runs.", false, s.deleteSession},
		{"GET", "/session/{id}/status", "One session's status; 404 when it does not exist.", true, s.sessionStatus},
		{"POST", "/session/{id}/wait", "Wait until the session is idle (or ?run= ended).", true, s.wait},
		{"GET", "/session/{id}/message", "List a session's messages with their parts.", false, s.listMessages},
		{"POST", "/session/{id}/message", "Send a prompt and wait for the run to end.", false, s.prompt},
		{"POST", "/session/{id}/command", "Run a custom command (its template with the arguments) and wait for the run to end.", false, s.runCommand},
		{"GET", "/session/{id}/message/{messageID}", "Get one message with its parts.", false, s.getMessage},
		{"POST", "/session/{id}/prompt_async", "Send a prompt; 204 once it is durably admitted.", false, s.promptAsync},
		{"POST", "/session/{id}/abort", "Abort the session's active run.", false, s.abort},
		{"POST", "/session/{id}/resume", "Continue the session's run held paused after a restart (agentd.resume, the session's resume); 409 when none is.", true, s.resumeSession},
		{"POST", "/session/{id}/summarize", "Compact the session: a summary replaces its history for the model.", false, s.summarize},
		{"GET", "/session/{id}/run", "List a session's runs, newest first.", true, s.listRuns},
		{"GET", "/session/{id}/run/{runID}", "Get one run.", true, s.getRun},
		{"GET", "/session/{id}/event", "Stream one session's durable events (SSE).", true, s.sessionEventStream},
		{"GET", "/permission", "Pending permission requests.", false, s.listPermissions},
		{"GET", "/question", "Pending questions the model asked (the question tool).", false, s.listQuestions},
		{"POST", "/question/{requestID}/reply", "Answer a question: the chosen labels, one list per question.", false, s.replyQuestion},
		{"POST", "/question/{requestID}/reject", "Dismiss a question.", false, s.rejectQuestion},
		{"POST", "/permission/{requestID}/reply", "Answer a permission request: once, always or reject.", false, s.replyPermission},
		{"POST", "/session/{id}/permissions/{permissionID}", "Answer a permission request (opencode v1 route).", false, s.replyPermissionV1},
		{"GET", "/session/{id}/children", "List a session's child sessions.", false, s.listChildren},
		{"GET", "/session/{id}/todo", "A session's todo list, as the model last wrote it with todowrite.", false, s.todos},
		{"GET", "/session/{id}/diff", "Files the session changed (?messageID=: that message's turn), with their patches.", false, s.diff},
		{"POST", "/session/{id}/revert", "Undo the session from a message (and part) on: its files restored, its messages hidden.", false, s.revert},
		{"POST", "/session/{id}/unrevert", "Bring back what the session's revert undid.", false, s.unrevert},
		{"POST", "/session/{id}/fork", "A new session with a copy of this one's messages before messageID.", false, s.fork},
		{"POST", "/session/{id}/share", "Share a session: refused, sharing is not available on this server.", false, s.share},
		{"DELETE", "/session/{id}/share", "Unshare a session: refused, sharing is not available on this server.", false, s.share},
		{"POST", "/session/{id}/shell", "Run the user's own shell command in the session (no model); answers with the bash call and its output.", false, s.shell},
		{"GET", "/config", "The configuration in opencode's shape, without secrets.", false, s.getConfig},
		{"GET", "/config/providers", "Configured providers with their models, and the default model of each.", false, s.configProviders},
		{"GET", "/provider", "Providers: all, connected, and the default model of each.", false, s.listProviders},
		{"GET", "/agent", "Agents a prompt may name.", false, s.listAgents},
		{"GET", "/path", "The server's home, state and config directories and the request's worktree.", false, s.getPath},
		{"GET", "/project/current", "The project of the request's directory.", false, s.currentProject},
		{"GET", "/project/{projectID}/directories", "The directories of the request's repository: its main worktree and its linked ones (strategy git_worktree: made by agentd).", false, s.projectDirectories},
		{"GET", "/vcs", "The git branch of the request's directory.", false, s.getVCS},
		// The project's git (vcs.go).
		{"GET", "/vcs/status", "Files the project's git sees changed, with added and removed lines (no patches).", false, s.vcsStatus},
		{"GET", "/vcs/diff", "The work tree's changes against HEAD (mode=git) or the default branch (mode=branch), with patches.", false, s.vcsDiff},
		{"GET", "/vcs/diff/raw", "The work tree's uncommitted changes as one patch (text/x-diff).", false, s.vcsDiffRaw},
		{"POST", "/vcs/apply", "Apply a patch to the work tree (git apply: all or nothing; the operator's edit rules decide).", false, s.vcsApply},
		{"GET", "/command", "Commands of the request's directory: the built-in init and review, the command files', the configuration's.", false, s.listCommands},
		{"POST", "/session/{id}/init", "Run the init command: the model writes or improves the project's AGENTS.md.", false, s.initProject},
		{"POST", "/instance/dispose", "Drop what is cached for the request's directory (its commands); it is read again on next use.", false, s.disposeInstance},
		{"GET", "/lsp", "Language servers (agentd runs none).", false, fixed([]struct{}{})},
		{"GET", "/formatter", "Formatters (agentd runs none).", false, fixed([]struct{}{})},
		{"GET", "/mcp", "The configured MCP servers and whether each is connected.", false, s.mcpStatus},
		{"GET", "/provider/auth", "Provider login methods: those of the plugins' auth hooks (none without plugins).", false, s.providerAuth},
		{"GET", "/experimental/capabilities", "Optional capabilities of the server.", false, fixed(map[string]bool{"backgroundSubagents": false})},
		{"GET", "/experimental/console", "opencode console state (not used by agentd).", false, fixed(consoleJSON{ConsoleManagedProviders: []string{}})},
		{"GET", "/experimental/resource", "MCP resources (none).", false, fixed(struct{}{})},
		{"GET", "/experimental/workspace", "Workspaces (none).", false, fixed([]struct{}{})},
		{"GET", "/experimental/workspace/status", "Workspace connections (none).", false, fixed([]struct{}{})},
		{"GET", "/find", "Lines of the directory's files matching a regular expression (?pattern=), ripgrep's shape.", false, s.findText},
		{"GET", "/find/file", "Files (and with ?dirs=true folders) whose path fuzzily matches ?query=.", false, s.findFiles},
		{"GET", "/find/symbol", "Workspace symbols: none, agentd runs no language server.", false, s.findSymbol},
		{"GET", "/file", "The entries of a folder of the directory (?path=).", false, s.listFiles},
		{"GET", "/file/content", "A file's content (?path=): text, or base64 for binary files.", false, s.fileContent},
		{"GET", "/file/status", "What the project's git sees changed (added and removed lines per file).", false, s.fileStatus},
		{"GET", "/doc", "This OpenAPI document.", false, s.doc},
		{"GET", "/node", "This node: its id, database kind, the run leases it holds and what confines the commands run for the model.", true, s.node},
		{"GET", "/metrics", "Metrics in Prometheus text format: runs, model and tool calls, tokens, events, the store, the process.", true, s.metrics},
	}
	s.routes = append(s.routes, s.projectRoutes()...)
	s.routes = append(s.routes, s.ptyRoutes()...)
	s.routes = append(s.routes, s.keyRoutes()...)
	s.routes = append(s.routes, s.restRoutes()...)
	s.routes = append(s.routes, s.scheduleRoutes()...)
	s.mux = http.NewServeMux()
	byPattern := map[string][]route{}
	var order []string
	for _, rt := range s.routes {
		if _, ok := byPattern[rt.pattern]; !ok {
			order = append(order, rt.pattern)
		}
		byPattern[rt.pattern] = append(byPattern[rt.pattern], rt)
	}
	for _, p := range order {
		s.mux.Handle(p, s.dispatch(byPattern[p]))
	}
	if cfg.Pprof {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// The dashboard: static files behind the same middleware as the API
	// (loopback and Origin checks, basic auth).
	// The page is /ui (paths with a trailing slash are refused, see
	// cleanPaths); its files are under /ui/.
	s.mux.Handle("GET /ui", ui.Handler("/ui", s.uiInitial))
	s.mux.Handle("GET /ui/", ui.Handler("/ui", s.uiInitial))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui", http.StatusFound)
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// dispatch picks the route by method and answers 405 (JSON, with Allow)
// for the others. Patterns are registered without methods so that the mux
// never answers in plain text.
func (s *Server) dispatch(rts []route) http.Handler {
	var allow []string
	for _, rt := range rts {
		allow = append(allow, rt.method)
	}
	sort.Strings(allow)
	handlers := make([]func(http.ResponseWriter, *http.Request) *apiError, len(rts))
	gates := make([]gate, len(rts))
	for i, rt := range rts {
		handlers[i], gates[i] = s.traced(rt, rt.h), s.gateOf(rt)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i, rt := range rts {
			if r.Method == rt.method || (r.Method == http.MethodHead && rt.method == http.MethodGet) {
				setRoute(r, rt.pattern)
				if !longRoute(rt) {
					// A client that stops reading cannot hold a handler.
					_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
				}
				if !s.gatePass(w, r, gates[i]) {
					return
				}
				if e := handlers[i](w, r); e != nil {
					writeError(w, e)
				}
				return
			}
		}
		setRoute(r, rts[0].pattern)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, name: "MethodNotAllowedError", msg: r.Method + " is not allowed on " + r.URL.Path})
	})
}

// writeTimeout bounds writing the answer of a route that answers at once
// (streams and waits are exempt).
const writeTimeout = 60 * time.Second

// longRoute reports whether a route answers late on purpose: event
// streams, websockets, and the routes that wait for a run.
func longRoute(rt route) bool {
	return strings.HasSuffix(rt.pattern, "/event") || strings.HasSuffix(rt.pattern, "/connect") || rt.method == http.MethodPost &&
		(strings.HasSuffix(rt.pattern, "/message") || strings.HasSuffix(rt.pattern, "/wait") || strings.HasSuffix(rt.pattern, "/summarize") ||
			strings.HasSuffix(rt.pattern, "/shell") || strings.HasSuffix(rt.pattern, "/command"))
}

// Handler returns the API with its middleware.
func (s *Server) Handler() http.Handler {
	var h http.Handler = s.mux
	h = s.readBody(h)
	h = s.cfg.Security.middleware(h, s.consumeTicket, s.cfg.Keys)
	h = cleanPaths(h)
	h = s.recoverPanics(h)
	return s.observe(h)
}

// readBody reads a request's body, bounded in size and in time, before the
// handler runs: a slow client cannot hold a handler, and no read deadline
// is left on the connection of a handler that waits (which would cut it).
func (s *Server) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.BodyLimit {
			writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLargeError", msg: "request body is too large"})
			return
		}
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.BodyLimit))
			if err != nil {
				// The deadline stays: net/http reads what is left of the
				// body before answering, and a stalled client must not
				// hold the connection through that either. The
				// connection is closed after the answer.
				w.Header().Set("Connection", "close")
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, name: "PayloadTooLargeError", msg: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)})
				} else {
					writeError(w, badRequest("read request body: %v", err))
				}
				return
			}
			_ = rc.SetReadDeadline(time.Time{})
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				writeError(w, &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: "internal server error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// storeErr maps store and engine errors to API errors.
// storageRetryAfter is the Retry-After, in seconds, of a write the storage
// refused.
const storageRetryAfter = 10

func (s *Server) storeErr(err error, what string) *apiError {
	var ie *engine.InputError
	var idc *engine.IDConflictError
	var hook *plugin.HookError
	if c, ok := s.st.(store.Classifier); ok && err != nil {
		err = c.Classify(err)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return notFound("%s not found", what)
	case errors.As(err, &ie):
		return badRequest("%s", ie.Msg)
	case errors.Is(err, engine.ErrSessionBusy):
		// A revert of the session's files is in progress.
		return &apiError{status: http.StatusConflict, name: "SessionBusyError", msg: err.Error()}
	case errors.Is(err, engine.ErrBusy):
		return &apiError{status: http.StatusConflict, name: "SessionBusyError", msg: "session is busy and the busy policy is reject"}
	case errors.Is(err, engine.ErrAlreadyAnswered):
		return &apiError{status: http.StatusConflict, name: "ConflictError", msg: err.Error()}
	case errors.As(err, &idc):
		return &apiError{status: http.StatusConflict, name: "ConflictError", msg: idc.Error()}
	case errors.Is(err, engine.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, name: "ServerClosingError", msg: err.Error()}
	case errors.As(err, &hook):
		// A plugin's hook failed or did not answer (chat.message,
		// command.execute.before): its reason, nothing admitted.
		return &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: hook.Message}
	case errors.Is(err, store.ErrStorageFull):
		// Nothing was written; the same request succeeds once space is
		// freed. The store's watcher has logged the failure.
		return &apiError{status: http.StatusServiceUnavailable, name: "StorageFullError",
			msg: "the database's disk is full; nothing was written, retry once space is freed", retryAfter: storageRetryAfter}
	case errors.Is(err, store.ErrStorage):
		if s.cfg.Unhealthy != nil {
			// A node whose database file was deleted or replaced fails
			// reads too (a reader connection opened since cannot find
			// the file): the answer names that cause, as a write's does.
			if lost := s.cfg.Unhealthy(); lost != nil {
				err = lost
			}
		}
		return &apiError{status: http.StatusServiceUnavailable, name: "StorageError",
			msg: "the database is unavailable (" + err.Error() + "); nothing was changed, retry", retryAfter: storageRetryAfter}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusServiceUnavailable, name: "RequestCancelledError", msg: "request cancelled"}
	default:
		s.log.Error("request failed", "what", what, "err", err)
		return &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: "internal error"}
	}
}
