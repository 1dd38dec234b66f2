package server

import (
	"maps"
	"net/http"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/mcp"
)

// restRoutes are the rest of opencode's operations (issue 37): the TUI
// control routes, a client's log line, the configuration's patch routes,
// message and part edits, MCP management, and what agentd answers in
// opencode's shape or refuses with a reason (console, workspaces, sync,
// provider OAuth, upgrade). Kept apart from the main table in server.go.
func (s *Server) restRoutes() []route {
	return []route{
		{"POST", "/tui/append-prompt", "Append text to the prompt of the TUIs attached to this server (event tui.prompt.append).", false, s.tuiAppendPrompt},
		{"POST", "/tui/submit-prompt", "Submit the TUIs' prompt (command prompt.submit).", false, s.tuiCommand("prompt.submit")},
		{"POST", "/tui/clear-prompt", "Clear the TUIs' prompt (command prompt.clear).", false, s.tuiCommand("prompt.clear")},
		{"POST", "/tui/open-help", "Open the TUIs' help dialog (command help.show).", false, s.tuiCommand("help.show")},
		{"POST", "/tui/open-sessions", "Open the TUIs' session list (command session.list).", false, s.tuiCommand("session.list")},
		{"POST", "/tui/open-themes", "Open the TUIs' theme list (command theme.switch).", false, s.tuiCommand("theme.switch")},
		{"POST", "/tui/open-models", "Open the TUIs' model list (command model.list).", false, s.tuiCommand("model.list")},
		{"POST", "/tui/execute-command", "Run a TUI command (opencode's legacy names are translated; others pass as they are).", false, s.tuiExecuteCommand},
		{"POST", "/tui/show-toast", "Show a toast in the TUIs.", false, s.tuiShowToast},
		{"POST", "/tui/publish", "Publish one of the four TUI events as given.", false, s.tuiPublish},
		{"POST", "/tui/select-session", "Make the TUIs show a session (404 when it does not exist).", false, s.tuiSelectSession},
		{"GET", "/tui/control/next", "The oldest request made of TUIs that no poller took yet; waits for one (?timeout=: 204 after it).", false, s.tuiControlNext},
		{"POST", "/tui/control/response", "A poller's answer to a TUI request (nothing waits for one: read and dropped).", false, s.tuiControlResponse},

		{"POST", "/log", "Write a client's line to the server's log (bounded in size and rate).", false, s.clientLog},
		{"PATCH", "/config", "Refused (403) unless it changes nothing: the configuration is the operator's files.", false, s.patchConfig},
		{"GET", "/global/config", "The configuration (agentd has one, the operator's), as GET /config.", false, s.getConfig},
		{"PATCH", "/global/config", "Refused (403) unless it changes nothing: the configuration is the operator's files.", false, s.patchConfig},
		{"POST", "/global/dispose", "Drop what is cached for every directory (their command files); announces global.disposed.", false, s.globalDispose},
		{"POST", "/global/upgrade", "Answers success false: agentd is upgraded by its operator, not by a client.", false, s.upgrade},

		{"DELETE", "/session/{id}/message/{messageID}", "Delete a message: retired as a tombstone; runs and events keep what happened (409 while a run is active).", false, s.deleteMessage},
		{"PATCH", "/session/{id}/message/{messageID}/part/{partID}", "Change the text of a text or reasoning part; its former version stays as a tombstone (409 while a run is active).", false, s.updatePart},
		{"DELETE", "/session/{id}/message/{messageID}/part/{partID}", "Delete a part (not one that records a step or a run's end); retired as a tombstone.", false, s.deletePart},

		{"POST", "/mcp", "Add a remote MCP server at run time, where the operator allows it (agentd.mcp.add); never a local one.", false, s.mcpAdd},
		{"POST", "/mcp/{name}/connect", "Connect an MCP server now; answers whether it is connected.", false, s.mcpConnect},
		{"POST", "/mcp/{name}/disconnect", "Disconnect an MCP server; it stays down until connected again.", false, s.mcpDisconnect},
		{"POST", "/mcp/{name}/auth", "Refused: agentd runs no MCP OAuth (credentials go in the server's headers).", false, s.mcpAuth},
		{"DELETE", "/mcp/{name}/auth", "Remove a server's OAuth credentials: agentd keeps none.", false, s.mcpAuthRemove},
		{"POST", "/mcp/{name}/auth/authenticate", "Refused: agentd runs no MCP OAuth.", false, s.mcpAuth},
		{"POST", "/mcp/{name}/auth/callback", "Refused: agentd runs no MCP OAuth.", false, s.mcpAuth},

		{"GET", "/experimental/session", "Sessions of every directory, with their project; ?cursor= pages (X-Next-Cursor).", false, s.experimentalSessions},
		{"POST", "/experimental/session/{id}/background", "Background a session's subagents: false, agentd's task tool waits for them.", false, s.background},
		{"GET", "/experimental/tool", "The node's tools with their descriptions and input schemas.", false, s.toolList},
		{"GET", "/experimental/tool/ids", "The names of the node's tools.", false, s.toolIDs},
		{"GET", "/experimental/console/orgs", "opencode console orgs: none.", false, fixed(consoleOrgsJSON{Orgs: []struct{}{}})},
		{"POST", "/experimental/console/switch", "Refused (501): agentd is not connected to opencode's console.", false, notHere(noConsole)},
		{"POST", "/experimental/workspace", "Refused (400): agentd has no workspace adapters.", false, s.createWorkspace},
		{"GET", "/experimental/workspace/adapter", "Workspace adapters (none).", false, fixed([]workspaceAdapterJSON{})},
		{"POST", "/experimental/workspace/sync-list", "Sync the workspace list: there are none (204).", false, noContent},
		{"POST", "/experimental/workspace/warp", "Move a session back to its local project (it is already: 204); no workspace to move it into (404).", false, s.warp},
		{"DELETE", "/experimental/workspace/{id}", "Remove a workspace: there are none (404).", false, s.removeWorkspace},
		{"POST", "/provider/{providerID}/oauth/authorize", "Begin a plugin's OAuth login to a provider (400 without such a plugin).", false, s.oauthAuthorize},
		{"POST", "/provider/{providerID}/oauth/callback", "End a plugin's OAuth login and store the credential (400 without such a plugin).", false, s.oauthCallback},
		{"POST", "/sync/start", "Start syncing workspaces: there are none (true).", false, fixed(true)},
		{"POST", "/sync/history", "Refused (501): agentd takes no part in opencode's workspace sync.", false, notHere(noSync)},
		{"POST", "/sync/replay", "Refused (501): agentd takes no part in opencode's workspace sync.", false, notHere(noSync)},
		{"POST", "/sync/steal", "Refused (501): agentd takes no part in opencode's workspace sync.", false, notHere(noSync)},
	}
}

// restOps documents restRoutes; init adds them to ops.
var restOps = map[string]op{
	"POST /tui/append-prompt":                                {body: tuiPromptBody{}, resp: true},
	"POST /tui/submit-prompt":                                {resp: true},
	"POST /tui/clear-prompt":                                 {resp: true},
	"POST /tui/open-help":                                    {resp: true},
	"POST /tui/open-sessions":                                {resp: true},
	"POST /tui/open-themes":                                  {resp: true},
	"POST /tui/open-models":                                  {resp: true},
	"POST /tui/execute-command":                              {body: tuiCommandBody{}, resp: true},
	"POST /tui/show-toast":                                   {body: tuiToastBody{}, resp: true},
	"POST /tui/publish":                                      {body: tuiPublishBody{}, resp: true},
	"POST /tui/select-session":                               {body: tuiSelectBody{}, resp: true},
	"GET /tui/control/next":                                  {resp: tuiRequestJSON{}, query: []param{{"timeout", "string", "give up after this long (a Go duration) and answer 204"}}},
	"POST /tui/control/response":                             {body: map[string]any{}, resp: true},
	"POST /log":                                              {body: logBody{}, resp: true},
	"PATCH /config":                                          {body: map[string]any{}, resp: map[string]any{}},
	"GET /global/config":                                     {resp: map[string]any{}},
	"PATCH /global/config":                                   {body: map[string]any{}, resp: map[string]any{}},
	"POST /global/dispose":                                   {resp: true},
	"POST /global/upgrade":                                   {body: upgradeBody{}, resp: upgradeJSON{}},
	"DELETE /session/{id}/message/{messageID}":               {resp: true},
	"PATCH /session/{id}/message/{messageID}/part/{partID}":  {body: core.Part{}, resp: core.Part{}},
	"DELETE /session/{id}/message/{messageID}/part/{partID}": {resp: true},
	"POST /mcp":                                              {body: mcpAddBody{}, resp: map[string]mcp.Status{}},
	"POST /mcp/{name}/connect":                               {resp: true},
	"POST /mcp/{name}/disconnect":                            {resp: true},
	"POST /mcp/{name}/auth":                                  {status: http.StatusBadRequest},
	"DELETE /mcp/{name}/auth":                                {resp: mcpAuthRemovedJSON{}},
	"POST /mcp/{name}/auth/authenticate":                     {status: http.StatusBadRequest},
	"POST /mcp/{name}/auth/callback":                         {body: mcpCallbackBody{}, status: http.StatusBadRequest},
	"GET /experimental/session":                              {resp: []globalSessionJSON{}, query: []param{qLimit, {"start", "integer", "only sessions updated at or after this time (ms)"}, {"cursor", "integer", "only sessions updated before this time (ms): X-Next-Cursor"}, {"roots", "boolean", "only sessions without a parent"}, {"search", "string", "only sessions whose title holds this"}}},
	"POST /experimental/session/{id}/background":             {resp: true},
	"GET /experimental/tool":                                 {resp: []toolJSON{}, query: []param{{"provider", "string", "ignored: every model gets the same tools"}, {"model", "string", "ignored"}}},
	"GET /experimental/tool/ids":                             {resp: []string{}},
	"GET /experimental/console/orgs":                         {resp: consoleOrgsJSON{}},
	"POST /experimental/console/switch":                      {body: consoleSwitchBody{}, status: http.StatusNotImplemented},
	"POST /experimental/workspace":                           {body: workspaceCreateBody{}, status: http.StatusBadRequest},
	"GET /experimental/workspace/adapter":                    {resp: []workspaceAdapterJSON{}},
	"POST /experimental/workspace/sync-list":                 {status: http.StatusNoContent},
	"POST /experimental/workspace/warp":                      {body: warpBody{}, status: http.StatusNoContent},
	"DELETE /experimental/workspace/{id}":                    {status: http.StatusNotFound},
	"POST /provider/{providerID}/oauth/authorize":            {body: authorizeBody{}, resp: authorization{}},
	"POST /provider/{providerID}/oauth/callback":             {body: oauthBody{}, resp: true},
	"POST /sync/start":                                       {resp: true},
	"POST /sync/history":                                     {body: map[string]int64{}, status: http.StatusNotImplemented},
	"POST /sync/replay":                                      {body: map[string]any{}, status: http.StatusNotImplemented},
	"POST /sync/steal":                                       {body: tuiSelectBody{}, status: http.StatusNotImplemented},
}

func init() { maps.Copy(ops, restOps) }
