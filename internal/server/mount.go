package server

import "net/http"

// Route is a route another package serves behind this server's middleware
// (security, body limits, access log, tracing) and lists in its OpenAPI
// document: the seam through which opencode 2's API (package apiv2) is
// served beside the v1 routes. The handler writes its own answers and
// errors, in its own dialect's shapes.
type Route struct {
	Method  string
	Pattern string
	Summary string
	// DocPattern is the path the document lists when the mux pattern is
	// not opencode's ("/api/fs/read/*" for "/api/fs/read/{path...}").
	DocPattern string
	// OperationID and Tag name the operation in the document.
	OperationID string
	Tag         string
	Handler     http.HandlerFunc
	Doc         RouteDoc
	// NotFound answers, in the route's dialect, that a session does not
	// exist: what an API key is told of a session it may not see (nil:
	// the v1 answer).
	NotFound func(w http.ResponseWriter, sessionID string)
}

// RouteDoc documents a mounted route: its query parameters, the type its
// handler decodes, the type it answers with (their schemas are computed
// as the v1 routes' are), and what kind of answer it gives.
type RouteDoc struct {
	Query []Param
	Body  any
	Resp  any
	// Status is the success status when it is not 200.
	Status int
	// Stream marks an event stream; Binary an application/octet-stream
	// answer.
	Stream, Binary bool
}

// Param is a query parameter of a mounted route.
type Param struct {
	Name, Kind, About string
}

// Mount adds routes served by another package. Call it before the server
// serves; a pattern the server already serves panics, as the mux does.
func (s *Server) Mount(rts ...Route) {
	if s.mounts == nil {
		s.mounts = map[string]Route{}
	}
	byPattern := map[string][]route{}
	var order []string
	for _, m := range rts {
		h := m.Handler
		rt := route{method: m.Method, pattern: m.Pattern, summary: m.Summary,
			h: func(w http.ResponseWriter, r *http.Request) *apiError {
				h(w, r)
				return nil
			}}
		s.mounts[m.Method+" "+m.Pattern] = m
		s.routes = append(s.routes, rt)
		if _, ok := byPattern[rt.pattern]; !ok {
			order = append(order, rt.pattern)
		}
		byPattern[rt.pattern] = append(byPattern[rt.pattern], rt)
	}
	for _, p := range order {
		s.mux.Handle(p, s.dispatch(byPattern[p]))
	}
}

// docOf returns a route's document entry, the path the document lists it
// under, and, for a mounted route, its own operation id and tag.
func (s *Server) docOf(rt route) (o op, path, opID, tag string) {
	m, ok := s.mounts[rt.method+" "+rt.pattern]
	if !ok {
		return ops()[rt.method+" "+rt.pattern], rt.pattern, "", ""
	}
	o = op{body: m.Doc.Body, resp: m.Doc.Resp, status: m.Doc.Status, stream: m.Doc.Stream, binary: m.Doc.Binary}
	for _, q := range m.Doc.Query {
		o.query = append(o.query, param{q.Name, q.Kind, q.About})
	}
	path = m.Pattern
	if m.DocPattern != "" {
		path = m.DocPattern
	}
	return o, path, m.OperationID, m.Tag
}
