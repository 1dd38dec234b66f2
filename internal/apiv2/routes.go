package apiv2

import (
	"net/http"

	"github.com/agentd/agentd/internal/server"
	"github.com/agentd/agentd/internal/workspace"
)

// Tag names opencode 2's operations in the server's document.
const Tag = "opencode v2"

// handler answers a request, or returns the error to answer.
type handler func(w http.ResponseWriter, r *http.Request) *apiError

type v2route struct {
	method, pattern, id, summary string
	h                            handler
	doc                          server.RouteDoc
}

var (
	qLocation = server.Param{Name: "location[directory]", Kind: "string", About: "the directory (default the server's)"}
	qLimit    = server.Param{Name: "limit", Kind: "integer", About: "at most this many items"}
	qOrder    = server.Param{Name: "order", Kind: "string", About: "asc or desc"}
	qCursor   = server.Param{Name: "cursor", Kind: "string", About: "the page a previous answer's cursor.previous or cursor.next names"}
	qAfter    = server.Param{Name: "after", Kind: "string", About: "the durable events after this seq (or the Last-Event-ID header)"}
)

// Doc shapes of the answers: {data} and {location, data}.
type (
	located[T any] struct {
		Location locationInfo `json:"location"`
		Data     T            `json:"data"`
	}
	wrapped[T any] struct {
		Data T `json:"data"`
	}
)

func loc(resp any) server.RouteDoc {
	return server.RouteDoc{Query: []server.Param{qLocation}, Resp: resp}
}

// table is every operation of opencode 2's API, in its document's order.
func (a *API) table() []v2route {
	out := a.sessionRoutes()
	out = append(out, a.catalogRoutes()...)
	out = append(out, a.askRoutes()...)
	return append(out, a.otherRoutes()...)
}

// sessionRoutes are the routes of sessions, their prompts, transcript and
// events (and the server's health and location, first in the document).
func (a *API) sessionRoutes() []v2route {
	return []v2route{
		{"GET", "/api/health", "v2.health.get", "Whether the server can serve (503 with the reason when it cannot).", a.health, server.RouteDoc{Resp: healthJSON{}}},
		{"GET", "/api/location", "v2.location.get", "The request's location: its directory and project.", a.getLocation, loc(locationInfo{})},
		{"GET", "/api/agent", "v2.agent.list", "Agents a session may use.", a.listAgents, loc(located[[]agentJSON]{})},
		{"GET", "/api/session", "v2.session.list", "Sessions, newest first (?order=asc oldest), a page at a time (cursor).", a.listSessions,
			server.RouteDoc{Query: []server.Param{qLimit, qOrder, qCursor, {Name: "search", Kind: "string", About: "only sessions whose title holds this"},
				{Name: "directory", Kind: "string", About: "only sessions working there"}}, Resp: sessionsPage{}}},
		{"POST", "/api/session", "v2.session.create", "Create a session at a location, with its agent and model.", a.createSession,
			server.RouteDoc{Body: createBody{}, Resp: wrapped[sessionInfo]{}}},
		{"GET", "/api/session/active", "v2.session.active", "Sessions running now (a non-terminal run); the others are idle or unknown.", a.activeSessions,
			server.RouteDoc{Resp: wrapped[map[string]activeJSON]{}}},
		{"GET", "/api/session/{sessionID}", "v2.session.get", "A session, with how its last run ended while it is idle; 404 when unknown.", a.getSession,
			server.RouteDoc{Resp: wrapped[sessionInfo]{}}},
		{"POST", "/api/session/{sessionID}/agent", "v2.session.switchAgent", "Switch the agent of the session's next prompts.", a.switchAgent,
			server.RouteDoc{Body: agentBody{}, Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/model", "v2.session.switchModel", "Switch the model of the session's next prompts.", a.switchModel,
			server.RouteDoc{Body: modelBody{}, Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/prompt", "v2.session.prompt", "Admit a prompt (steer or queue; an id makes a retry idempotent); answers once it is durable.", a.prompt,
			server.RouteDoc{Body: promptBody{}, Resp: wrapped[admittedJSON]{}}},
		{"POST", "/api/session/{sessionID}/compact", "v2.session.compact", "Compact the session: a summary replaces its history for the model.", a.compact,
			server.RouteDoc{Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/wait", "v2.session.wait", "Wait until the session is idle.", a.wait, server.RouteDoc{Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/revert/stage", "v2.session.revert.stage", "Undo the session from a message on: its files restored, its messages hidden.", a.revertStage,
			server.RouteDoc{Body: stageBody{}, Resp: wrapped[revertState]{}}},
		{"POST", "/api/session/{sessionID}/revert/clear", "v2.session.revert.clear", "Bring back what the staged revert undid.", a.revertClear,
			server.RouteDoc{Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/revert/commit", "v2.session.revert.commit", "Retire for good what the staged revert hides.", a.revertCommit,
			server.RouteDoc{Status: http.StatusNoContent}},
		{"GET", "/api/session/{sessionID}/context", "v2.session.context", "The session's messages the model sees: since its last compaction.", a.context,
			server.RouteDoc{Resp: wrapped[[]any]{}}},
		{"GET", "/api/session/{sessionID}/history", "v2.session.history", "The session's durable events after a seq, a page at a time.", a.history,
			server.RouteDoc{Query: []server.Param{qLimit, qAfter}, Resp: historyJSON{}}},
		{"GET", "/api/session/{sessionID}/event", "v2.session.events", "The session's durable events (SSE), replayed after ?after= or Last-Event-ID, then live.", a.sessionEvents,
			server.RouteDoc{Query: []server.Param{qAfter}, Stream: true}},
		{"POST", "/api/session/{sessionID}/interrupt", "v2.session.interrupt", "Interrupt the session's run; says whether one was running.", a.interrupt,
			server.RouteDoc{Resp: interruptJSON{}}},
		{"GET", "/api/session/{sessionID}/message/{messageID}", "v2.session.message", "One message of the session.", a.message, server.RouteDoc{Resp: wrapped[any]{}}},
		{"GET", "/api/session/{sessionID}/message", "v2.session.messages", "The session's messages, newest first (?order=asc oldest), a page at a time.", a.messages,
			server.RouteDoc{Query: []server.Param{qLimit, qOrder, qCursor}, Resp: messagesPage{}}},
	}
}

// catalogRoutes are the models, providers, integrations and credentials.
func (a *API) catalogRoutes() []v2route {
	return []v2route{
		{"GET", "/api/model", "v2.model.list", "Models of the configured providers.", a.listModels, loc(located[[]modelJSON]{})},
		{"GET", "/api/provider", "v2.provider.list", "Configured providers.", a.listProviders, loc(located[[]providerJSON]{})},
		{"GET", "/api/provider/{providerID}", "v2.provider.get", "One configured provider.", a.getProvider, loc(located[providerJSON]{})},
		{"GET", "/api/integration", "v2.integration.list", "Providers a key can connect, and their connections.", a.listIntegrations, loc(located[[]integrationJSON]{})},
		{"GET", "/api/integration/{integrationID}", "v2.integration.get", "One integration.", a.getIntegration, loc(located[integrationJSON]{})},
		{"POST", "/api/integration/{integrationID}/connect/key", "v2.integration.connect.key", "Store a provider's API key (the credential store).", a.connectKey,
			server.RouteDoc{Query: []server.Param{qLocation}, Body: keyBody{}, Status: http.StatusNoContent}},
		{"POST", "/api/integration/{integrationID}/connect/oauth", "v2.integration.connect.oauth", "Refused: OAuth logins need a browser on the server's machine.", a.oauthRefused,
			server.RouteDoc{Status: http.StatusBadRequest}},
		{"GET", "/api/integration/attempt/{attemptID}", "v2.integration.attempt.status", "Refused: no OAuth attempt runs on this server.", a.oauthRefused,
			server.RouteDoc{Status: http.StatusBadRequest}},
		{"DELETE", "/api/integration/attempt/{attemptID}", "v2.integration.attempt.cancel", "Refused: no OAuth attempt runs on this server.", a.oauthRefused,
			server.RouteDoc{Status: http.StatusBadRequest}},
		{"POST", "/api/integration/attempt/{attemptID}/complete", "v2.integration.attempt.complete", "Refused: no OAuth attempt runs on this server.", a.oauthRefused,
			server.RouteDoc{Status: http.StatusBadRequest}},
		{"PATCH", "/api/credential/{credentialID}", "v2.credential.update", "Rename a stored key (its id is its provider's).", a.updateCredential,
			server.RouteDoc{Body: labelBody{}, Status: http.StatusNoContent}},
		{"DELETE", "/api/credential/{credentialID}", "v2.credential.remove", "Forget a stored key.", a.removeCredential, server.RouteDoc{Status: http.StatusNoContent}},
	}
}

// askRoutes are the permission requests and saved approvals.
func (a *API) askRoutes() []v2route {
	return []v2route{
		{"GET", "/api/permission/request", "v2.permission.request.list", "Pending permission requests of every session.", a.listPermissions, loc(located[[]permissionJSON]{})},
		{"GET", "/api/permission/saved", "v2.permission.saved.list", "Saved approvals: the rules the sessions' \"always\" answers granted.", a.listSaved,
			server.RouteDoc{Resp: wrapped[[]savedJSON]{}}},
		{"DELETE", "/api/permission/saved/{id}", "v2.permission.saved.remove", "Withdraw a saved approval.", a.removeSaved, server.RouteDoc{Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/permission", "v2.session.permission.create", "Decide a permission the way the session's tool calls are decided: allow, deny or ask.", a.createPermission,
			server.RouteDoc{Body: permissionBody{}, Resp: wrapped[decisionJSON]{}}},
		{"GET", "/api/session/{sessionID}/permission", "v2.session.permission.list", "The session's pending permission requests.", a.sessionPermissions,
			server.RouteDoc{Resp: wrapped[[]permissionJSON]{}}},
		{"GET", "/api/session/{sessionID}/permission/{requestID}", "v2.session.permission.get", "One pending permission request.", a.getPermission,
			server.RouteDoc{Resp: wrapped[permissionJSON]{}}},
		{"POST", "/api/session/{sessionID}/permission/{requestID}/reply", "v2.session.permission.reply", "Answer a permission request: once, always or reject.", a.replyPermission,
			server.RouteDoc{Body: replyBody{}, Status: http.StatusNoContent}},
	}
}

// otherRoutes are the files, commands, skills, the instance's events,
// the terminals (pty.go), the questions and the references.
func (a *API) otherRoutes() []v2route {
	out := []v2route{
		{"GET", "/api/fs/read/{path...}", "v2.fs.read", "A file's bytes.", a.fsRead, server.RouteDoc{Query: []server.Param{qLocation}, Binary: true}},
		{"GET", "/api/fs/list", "v2.fs.list", "A folder's entries.", a.fsList,
			server.RouteDoc{Query: []server.Param{qLocation, {Name: "path", Kind: "string", About: "a folder of the directory"}}, Resp: located[[]workspace.Entry]{}}},
		{"GET", "/api/fs/find", "v2.fs.find", "Files (and folders) whose path fuzzily matches ?query=.", a.fsFind,
			server.RouteDoc{Query: []server.Param{qLocation, {Name: "query", Kind: "string", About: "what to match"},
				{Name: "type", Kind: "string", About: "file or directory"}, qLimit}, Resp: located[[]workspace.Entry]{}}},
		{"GET", "/api/command", "v2.command.list", "Commands of the directory.", a.listCommands, loc(located[[]commandJSON]{})},
		{"GET", "/api/skill", "v2.skill.list", "Skills of the directory.", a.listSkills, loc(located[[]skillJSON]{})},
		{"GET", "/api/event", "v2.event.subscribe", "Every event (SSE) in opencode 2's shapes, replayed after ?after= or Last-Event-ID, then live.", a.events,
			server.RouteDoc{Query: []server.Param{qAfter}, Stream: true}},
	}
	out = append(out, a.ptyRoutes()...)
	return append(out, []v2route{
		{"GET", "/api/question/request", "v2.question.request.list", "Pending questions of every session.", a.listQuestions, loc(located[[]questionJSON]{})},
		{"GET", "/api/session/{sessionID}/question", "v2.session.question.list", "The session's pending questions.", a.sessionQuestions,
			server.RouteDoc{Resp: wrapped[[]questionJSON]{}}},
		{"POST", "/api/session/{sessionID}/question/{requestID}/reply", "v2.session.question.reply", "Answer a question: the labels chosen, one list per question.", a.replyQuestion,
			server.RouteDoc{Body: answersBody{}, Status: http.StatusNoContent}},
		{"POST", "/api/session/{sessionID}/question/{requestID}/reject", "v2.session.question.reject", "Dismiss a question.", a.rejectQuestion,
			server.RouteDoc{Status: http.StatusNoContent}},
		{"GET", "/api/reference", "v2.reference.list", "References of the directory (none).", a.listReferences, loc(located[[]struct{}]{})},
	}...)
}

// Routes returns the routes for the server to mount.
func (a *API) Routes() []server.Route {
	var out []server.Route
	for _, rt := range a.table() {
		h := rt.h
		m := server.Route{Method: rt.method, Pattern: rt.pattern, Summary: rt.summary, OperationID: rt.id, Tag: Tag, Doc: rt.doc,
			Handler: func(w http.ResponseWriter, r *http.Request) {
				if e := h(w, r); e != nil {
					writeError(w, e)
				}
			},
			NotFound: func(w http.ResponseWriter, id string) { writeError(w, sessionNotFound(id)) }}
		if rt.pattern == "/api/fs/read/{path...}" {
			m.DocPattern = "/api/fs/read/*"
		}
		out = append(out, m)
	}
	return out
}
