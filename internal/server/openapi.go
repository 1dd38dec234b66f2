package server

import (
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/apidoc"
	"github.com/agentd/agentd/internal/command"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/snapshot"
	"github.com/agentd/agentd/internal/workspace"
)

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// op documents one route beyond its summary: its query parameters, the
// type its handler decodes and the type it answers with. The schemas are
// computed from those types (package apidoc), and a test sends every
// route a request and checks the answer against the document.
type op struct {
	query []param
	// body is a value of the type the handler decodes (nil: none).
	body any
	// resp is a value of the type of the success answer (nil: none).
	resp any
	// status is the success status when it is not 200.
	status int
	// stream marks an event stream (text/event-stream of events); global
	// streams wrap each event with its session's directory.
	stream, global bool
	// text marks a text answer (text/plain, or mime when set); binary an
	// application/octet-stream one.
	text, binary bool
	mime         string
}

// param is a query parameter.
type param struct {
	name, kind, about string
}

var (
	qLimit     = param{"limit", "integer", "at most this many items"}
	qDirectory = param{"directory", "string", "the workspace (or the x-opencode-directory header); default the server's"}
	qPath      = param{"path", "string", "a path inside the directory"}
	qQuery     = param{"query", "string", "what to match, fuzzily"}
	qCursor    = param{"after", "integer", "replay the durable events after this seq (or the Last-Event-ID header)"}
	qLocation  = param{"location[directory]", "string", "the directory (opencode's next API)"}
)

// ops documents the routes, by "METHOD pattern"; TestOpenAPIMatchesRoutes
// keeps it and the route table one to one.
var ops = map[string]op{
	"GET /global/health":                            {resp: healthJSON{}},
	"GET /event":                                    {stream: true, query: []param{qCursor}},
	"GET /global/event":                             {stream: true, global: true, query: []param{qCursor}},
	"GET /session":                                  {resp: []core.Session{}, query: []param{qLimit, {"start", "integer", "only sessions updated at or after this time (ms)"}, {"roots", "boolean", "only sessions without a parent"}, {"search", "string", "only sessions whose title holds this"}, {"cursor", "string", "the next page (from the Link header)"}}},
	"POST /session":                                 {body: sessionInput{}, resp: core.Session{}},
	"GET /session/status":                           {resp: map[string]core.SessionStatus{}},
	"GET /session/active":                           {resp: map[string]core.SessionStatus{}},
	"GET /session/{id}":                             {resp: core.Session{}},
	"PATCH /session/{id}":                           {body: updateSessionBody{}, resp: core.Session{}},
	"DELETE /session/{id}":                          {resp: true},
	"GET /session/{id}/status":                      {resp: core.SessionStatus{}},
	"POST /session/{id}/wait":                       {resp: core.SessionStatus{}, query: []param{{"timeout", "string", "give up after this long (a Go duration; 408 with the status)"}, {"run", "string", "wait for this run to end instead"}}},
	"GET /session/{id}/message":                     {resp: []core.MessageWithParts{}, query: []param{qLimit, {"before", "string", "the messages before this message id"}}},
	"POST /session/{id}/message":                    {body: promptBody{}, resp: core.MessageWithParts{}, query: []param{{"busy", "string", "steer, queue, reject or interrupt"}, {"errors", "string", "status: a failed run answers 500 or 502 instead of 200"}}},
	"POST /session/{id}/command":                    {body: commandBody{}, resp: core.MessageWithParts{}},
	"GET /session/{id}/message/{messageID}":         {resp: core.MessageWithParts{}},
	"POST /session/{id}/prompt_async":               {body: promptBody{}, status: http.StatusNoContent, query: []param{{"busy", "string", "steer, queue, reject or interrupt"}}},
	"POST /session/{id}/abort":                      {resp: true},
	"POST /session/{id}/resume":                     {resp: core.SessionStatus{}},
	"POST /session/{id}/summarize":                  {body: summarizeBody{}, resp: true},
	"GET /session/{id}/run":                         {resp: []core.Run{}, query: []param{qLimit}},
	"GET /session/{id}/run/{runID}":                 {resp: core.Run{}},
	"GET /session/{id}/event":                       {stream: true, query: []param{qCursor}},
	"GET /permission":                               {resp: []core.OpencodePermission{}},
	"GET /question":                                 {resp: []core.OpencodeQuestion{}},
	"POST /question/{requestID}/reply":              {body: questionReplyBody{}, resp: true},
	"POST /question/{requestID}/reject":             {resp: true},
	"POST /permission/{requestID}/reply":            {body: permissionReplyBody{}, resp: true},
	"POST /session/{id}/permissions/{permissionID}": {body: permissionReplyV1Body{}, resp: true},
	"GET /session/{id}/children":                    {resp: []core.Session{}, query: []param{qLimit}},
	"GET /session/{id}/todo":                        {resp: []core.Todo{}},
	"GET /session/{id}/diff":                        {resp: []snapshot.FileDiff{}, query: []param{{"messageID", "string", "that message's turn only"}}},
	"POST /session/{id}/revert":                     {body: revertBody{}, resp: core.Session{}},
	"POST /session/{id}/unrevert":                   {resp: core.Session{}},
	"POST /session/{id}/fork":                       {body: forkBody{}, resp: core.Session{}},
	"POST /session/{id}/share":                      {status: http.StatusBadRequest},
	"DELETE /session/{id}/share":                    {status: http.StatusBadRequest},
	"POST /session/{id}/shell":                      {body: shellBody{}, resp: core.MessageWithParts{}},
	"GET /config":                                   {resp: map[string]any{}},
	"GET /config/providers":                         {resp: configProvidersJSON{}},
	"GET /provider":                                 {resp: providerListJSON{}},
	"GET /agent":                                    {resp: []agentJSON{}},
	"GET /path":                                     {resp: pathJSON{}},
	"GET /project/current":                          {resp: projectJSON{}},
	"GET /project/{projectID}/directories":          {resp: []projectDirJSON{}},
	"GET /vcs":                                      {resp: vcsJSON{}},
	"GET /vcs/status":                               {resp: []vcsStatusJSON{}},
	"GET /vcs/diff":                                 {resp: []snapshot.FileDiff{}, query: []param{{"mode", "string", "git (against HEAD) or branch (against the default branch; required)"}, {"context", "integer", "lines of context around each change (default: the whole file)"}}},
	"GET /vcs/diff/raw":                             {text: true, mime: "text/x-diff"},
	"POST /vcs/apply":                               {body: vcsApplyBody{}, resp: vcsAppliedJSON{}},
	"GET /command":                                  {resp: []command.Command{}},
	"POST /session/{id}/init":                       {body: initBody{}, resp: true},
	"POST /instance/dispose":                        {resp: true},
	"GET /lsp":                                      {resp: []struct{}{}},
	"GET /formatter":                                {resp: []struct{}{}},
	"GET /mcp":                                      {resp: map[string]mcp.Status{}},
	"GET /provider/auth":                            {resp: map[string][]authMethodDoc{}},
	"GET /experimental/capabilities":                {resp: map[string]bool{}},
	"GET /experimental/console":                     {resp: consoleJSON{}},
	"GET /experimental/resource":                    {resp: struct{}{}},
	"GET /experimental/workspace":                   {resp: []struct{}{}},
	"GET /experimental/workspace/status":            {resp: []struct{}{}},
	"GET /find":                                     {resp: []workspace.Match{}, query: []param{{"pattern", "string", "a regular expression (required)"}}},
	"GET /find/file":                                {resp: []string{}, query: []param{qQuery, {"dirs", "boolean", "folders too"}, {"type", "string", "file or directory"}, qLimit}},
	"GET /find/symbol":                              {resp: []struct{}{}, query: []param{qQuery}},
	"GET /file":                                     {resp: []workspace.Node{}, query: []param{qPath}},
	"GET /file/content":                             {resp: workspace.Content{}, query: []param{qPath}},
	"GET /file/status":                              {resp: []workspace.Change{}},
	"GET /doc":                                      {resp: map[string]any{}},
	"GET /node":                                     {resp: nodeJSON{}},
	"GET /metrics":                                  {text: true},
}

// OpenAPI returns the OpenAPI 3.1 document of the routes this server
// serves, built from the route table and ops: parameters, request bodies
// and answers, their schemas computed from the handlers' types.
func (s *Server) OpenAPI() map[string]any {
	set := apidoc.NewSet()
	set.Add("Event", map[string]any{"type": "object", "required": []string{"type", "properties"},
		"properties":  map[string]any{"type": map[string]any{"type": "string"}, "properties": map[string]any{"type": "object"}},
		"description": "One event: its seq is the SSE id of durable events; message.part.delta and server.* events are live-only."})
	set.Add("GlobalEvent", map[string]any{"type": "object", "required": []string{"directory", "payload"},
		"properties": map[string]any{"directory": map[string]any{"type": "string"}, "payload": map[string]any{"$ref": "#/components/schemas/Event"}}})
	set.Add("TaggedError", map[string]any{"type": "object", "required": []string{"_tag", "message"},
		"description": "The shape opencode's document gives some errors (SessionBusyError, PermissionNotFoundError, QuestionNotFoundError).",
		"properties":  map[string]any{"_tag": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"}}})
	errSchema := map[string]any{"oneOf": []any{set.Of(core.Error{}), map[string]any{"$ref": "#/components/schemas/TaggedError"}}}
	errResp := map[string]any{"description": "An error: its name (or _tag) says which, the message what happened.",
		"content": map[string]any{"application/json": map[string]any{"schema": errSchema}}}
	paths := map[string]any{}
	for _, rt := range s.routes {
		o, path, opID, tag := s.docOf(rt)
		path = docPath(path)
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		query := o.query
		if !rt.native && !strings.HasPrefix(rt.pattern, "/api/") {
			query = append([]param{qDirectory}, query...)
		}
		for _, q := range query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.about,
				"schema": map[string]any{"type": q.kind}})
		}
		if o.stream {
			params = append(params, map[string]any{"name": "Last-Event-ID", "in": "header",
				"description": "resume after this seq", "schema": map[string]any{"type": "string"}})
		}
		status, ok := o.success(set, errResp, rt.pattern)
		responses := map[string]any{"default": errResp, status: ok}
		if status[0] != '4' {
			// Every route refuses something: a bad body or query, an
			// unknown id, a missing password.
			responses["4XX"] = errResp
		}
		if opID == "" {
			opID = operationID(rt.method, rt.pattern)
		}
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": opID,
			"responses":   responses,
			"tags":        []string{"opencode"},
		}
		switch {
		case tag != "":
			op["tags"] = []string{tag}
		case rt.native:
			op["tags"] = []string{"agentd"}
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if o.body != nil {
			op["requestBody"] = map[string]any{"required": true,
				"content": map[string]any{"application/json": map[string]any{"schema": set.OfRequest(o.body)}}}
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "agentd", "version": s.cfg.Version,
			"description": "Headless server for AI coding-agent sessions, compatible with opencode's session API."},
		// Relative to where the document was read from: the same server.
		"servers":    []any{map[string]any{"url": "/", "description": "this agentd server"}},
		"paths":      paths,
		"security":   s.docSecurity(),
		"components": map[string]any{"schemas": set.Components(), "securitySchemes": s.docSchemes()},
	}
}

// docSchemes are the ways a client may authenticate: basic auth where the
// server has a password, a bearer token where it has API keys.
func (s *Server) docSchemes() map[string]any {
	schemes := map[string]any{}
	if s.cfg.Security.Password != "" {
		schemes["basicAuth"] = map[string]any{"type": "http", "scheme": "basic",
			"description": "The server's password (--password, OPENCODE_SERVER_PASSWORD) with the user opencode (or OPENCODE_SERVER_USERNAME)."}
	}
	if s.cfg.Keys != nil {
		schemes["bearerAuth"] = map[string]any{"type": "http", "scheme": "bearer",
			"description": "An API key's token (agentd key create); the key sees only what it was granted."}
	}
	return schemes
}

// docSecurity is the document's security requirement: one of docSchemes,
// or none (an empty requirement) where the server has no password.
func (s *Server) docSecurity() []any {
	var req []any
	for _, name := range slices.Sorted(maps.Keys(s.docSchemes())) {
		req = append(req, map[string]any{name: []any{}})
	}
	if s.cfg.Security.Password == "" {
		req = append(req, map[string]any{})
	}
	return req
}

// docPath names a route's path parameters as opencode's document does:
// the mux's patterns say {id} for a session, opencode {sessionID}.
func docPath(pattern string) string {
	return strings.ReplaceAll(pattern, "/session/{id}", "/session/{sessionID}")
}

// success is an operation's success answer in the document, by its
// status; mounted routes' 204s say nothing of prompts.
func (o op) success(set *apidoc.Set, errResp map[string]any, pattern string) (string, map[string]any) {
	ok := map[string]any{"description": "OK"}
	switch {
	case o.stream:
		ev := "#/components/schemas/Event"
		if o.global {
			ev = "#/components/schemas/GlobalEvent"
		}
		ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"$ref": ev}}}
	case o.text:
		mime := "text/plain"
		if o.mime != "" {
			mime = o.mime
		}
		ok["content"] = map[string]any{mime: map[string]any{"schema": map[string]any{"type": "string"}}}
	case o.binary:
		ok["content"] = map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case o.status == http.StatusNoContent && strings.HasSuffix(pattern, "prompt_async"):
		return "204", map[string]any{"description": "Admitted: the prompt is durable and its run will start."}
	case o.status == http.StatusNoContent:
		return "204", map[string]any{"description": "Done: no content."}
	case o.status >= 400:
		return strconv.Itoa(o.status), errResp
	case o.resp != nil:
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": set.Of(o.resp)}}
	}
	return "200", ok
}

func operationID(method, pattern string) string {
	var sb strings.Builder
	sb.WriteString(strings.ToLower(method))
	for _, seg := range strings.Split(pattern, "/") {
		seg = strings.Trim(seg, "{}")
		if seg == "" {
			continue
		}
		seg = strings.ReplaceAll(seg, "_", "")
		sb.WriteString(strings.ToUpper(seg[:1]) + seg[1:])
	}
	return sb.String()
}

func (s *Server) doc(w http.ResponseWriter, r *http.Request) *apiError {
	writeJSON(w, http.StatusOK, s.OpenAPI())
	return nil
}
