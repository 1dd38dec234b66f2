package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/mcp"
)

// opencode's MCP management routes. Connecting and disconnecting apply
// to the servers the operator configured (a disconnected one stays down
// until connected again). Adding a server at run time is the operator's
// choice (agentd.mcp.add): "remote" lets clients add servers reached over
// http(s); a local server is a command the server would run, which no
// client may name. agentd runs no MCP OAuth: a remote server's
// credentials go in its headers in the configuration.

// mcpAdmin is what the MCP manager offers these routes (*mcp.Manager).
type mcpAdmin interface {
	Statuses() map[string]mcp.Status
	Add(ctx context.Context, name string, s mcp.Server) (mcp.Status, error)
	Connect(ctx context.Context, name string) (mcp.Status, error)
	Disconnect(name string) error
	Has(name string) bool
}

type mcpAddBody struct {
	Name   string     `json:"name"`
	Config mcp.Server `json:"config"`
}

type mcpAuthRemovedJSON struct {
	Success bool `json:"success"`
}

// mcps returns the manager, or nil when the server has none.
func (s *Server) mcps() mcpAdmin {
	m, _ := s.cfg.MCP.(mcpAdmin)
	return m
}

// mcpServer returns the manager when it has the named server, or the
// error opencode's document gives an unknown one.
func (s *Server) mcpServer(r *http.Request) (mcpAdmin, *apiError) {
	name := r.PathValue("name")
	if m := s.mcps(); m != nil && m.Has(name) {
		return m, nil
	}
	return nil, tagged(http.StatusNotFound, "McpServerNotFoundError", "no MCP server is named "+name, map[string]string{"name": name})
}

func (s *Server) mcpChanged(name string) {
	s.hub.PublishLive(core.MustEvent("", "mcp.tools.changed", map[string]string{"server": name}))
}

func (s *Server) mcpAdd(w http.ResponseWriter, r *http.Request) *apiError {
	var b mcpAddBody
	if e := decodeJSON(r, &b, false); e != nil {
		return e
	}
	switch {
	case b.Name == "":
		return badRequest("name is required")
	case b.Config.Type == "local":
		return &apiError{status: http.StatusForbidden, name: "ForbiddenError",
			msg: "a local MCP server is a command the server would run: clients cannot add one; the operator adds it to the configuration (mcp." + b.Name + ")"}
	case s.cfg.MCPAdd != "remote":
		return &apiError{status: http.StatusForbidden, name: "ForbiddenError",
			msg: `adding MCP servers at run time is off on this server; its operator allows remote ones with agentd.mcp.add: "remote"`}
	}
	m := s.mcps()
	if m == nil {
		return &apiError{status: http.StatusServiceUnavailable, name: "UnavailableError", msg: "this server runs no MCP manager"}
	}
	_, err := m.Add(r.Context(), b.Name, b.Config)
	switch {
	case errors.Is(err, mcp.ErrExists):
		return &apiError{status: http.StatusConflict, name: "ConflictError", msg: "an MCP server is already named " + b.Name}
	case errors.Is(err, mcp.ErrNotStarted):
		return &apiError{status: http.StatusServiceUnavailable, name: "ServerClosingError", msg: err.Error()}
	case err != nil:
		return badRequest("config: %v", err)
	}
	s.mcpChanged(b.Name)
	writeJSON(w, http.StatusOK, m.Statuses())
	return nil
}

// mcpConnect connects the server now and answers whether it is connected
// (GET /mcp says why not).
func (s *Server) mcpConnect(w http.ResponseWriter, r *http.Request) *apiError {
	m, e := s.mcpServer(r)
	if e != nil {
		return e
	}
	st, err := m.Connect(r.Context(), r.PathValue("name"))
	if err != nil {
		return &apiError{status: http.StatusServiceUnavailable, name: "ServerClosingError", msg: err.Error()}
	}
	s.mcpChanged(r.PathValue("name"))
	writeJSON(w, http.StatusOK, st.Status == mcp.StatusConnected)
	return nil
}

func (s *Server) mcpDisconnect(w http.ResponseWriter, r *http.Request) *apiError {
	m, e := s.mcpServer(r)
	if e != nil {
		return e
	}
	if err := m.Disconnect(r.PathValue("name")); err != nil {
		return s.storeErr(err, "MCP server "+r.PathValue("name"))
	}
	s.mcpChanged(r.PathValue("name"))
	writeJSON(w, http.StatusOK, true)
	return nil
}

// mcpAuth refuses the steps of an MCP OAuth login.
func (s *Server) mcpAuth(w http.ResponseWriter, r *http.Request) *apiError {
	if _, e := s.mcpServer(r); e != nil {
		return e
	}
	var v map[string]any
	if e := decodeJSON(r, &v, true); e != nil {
		return e
	}
	return badRequest("MCP server %s: agentd runs no MCP OAuth login; give the server's credentials in its headers in the configuration", r.PathValue("name"))
}

// mcpAuthRemove answers that no OAuth credentials of the server are kept:
// agentd stores none.
func (s *Server) mcpAuthRemove(w http.ResponseWriter, r *http.Request) *apiError {
	if _, e := s.mcpServer(r); e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, mcpAuthRemovedJSON{Success: true})
	return nil
}
