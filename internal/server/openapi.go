package server

import (
	"net/http"
	"regexp"
	"strings"
)

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// OpenAPI returns the OpenAPI 3.1 document of the routes this server
// serves. It is built from the same table as the mux.
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]any{}
	errResp := map[string]any{"description": "Error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	for _, rt := range s.routes {
		item, _ := paths[rt.pattern].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.pattern] = item
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.pattern, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt.method, rt.pattern),
			"responses": map[string]any{
				"200":     map[string]any{"description": "OK"},
				"default": errResp,
			},
		}
		if rt.native {
			op["tags"] = []string{"agentd"}
		} else {
			op["tags"] = []string{"opencode"}
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "agentd", "version": s.cfg.Version, "description": "Headless server for AI coding-agent sessions, compatible with opencode's session API."},
		"paths":   paths,
		"components": map[string]any{"schemas": map[string]any{"Error": map[string]any{
			"type": "object", "required": []string{"name", "data"},
			"properties": map[string]any{
				"name": map[string]any{"type": "string"},
				"data": map[string]any{"type": "object", "required": []string{"message"}, "properties": map[string]any{"message": map[string]any{"type": "string"}}},
			},
		}}},
	}
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
