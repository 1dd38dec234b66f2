package server

import (
	"testing"

	"github.com/agentd/agentd/internal/access"
)

// TestEveryRouteDocumented keeps ops and the route table one to one: a
// route without its document entry, or an entry without its route,
// fails.
func TestEveryRouteDocumented(t *testing.T) {
	s := New(nil, nil, nil, Config{})
	seen := map[string]bool{}
	for _, rt := range s.routes {
		key := rt.method + " " + rt.pattern
		seen[key] = true
		if _, ok := ops()[key]; !ok {
			t.Errorf("%s has no entry in ops (its parameters, body and answer)", key)
		}
	}
	for key := range ops() {
		if !seen[key] {
			t.Errorf("ops documents %s, which is not a route", key)
		}
	}
}

// TestDocSecurity: the document declares basic auth, and requires it of
// every operation, exactly when the server has a password.
func TestDocSecurity(t *testing.T) {
	for _, pw := range []string{"", "secret"} {
		d := New(nil, nil, nil, Config{Security: Security{Password: pw}}).OpenAPI()
		schemes := d["components"].(map[string]any)["securitySchemes"].(map[string]any)
		sec := d["security"].([]any)
		_, basic := schemes["basicAuth"]
		required := len(sec) == 1 && len(sec[0].(map[string]any)) == 1
		if basic != (pw != "") || required != (pw != "") {
			t.Errorf("password %q: schemes %v, security %v", pw, schemes, sec)
		}
	}
	// API keys: a bearer token beside the password, and nothing else
	// required where there is no password.
	for _, pw := range []string{"", "secret"} {
		d := New(nil, nil, nil, Config{Security: Security{Password: pw}, Keys: &access.Keys{}}).OpenAPI()
		schemes := d["components"].(map[string]any)["securitySchemes"].(map[string]any)
		sec := d["security"].([]any)
		_, bearer := schemes["bearerAuth"]
		anonymous := len(sec[len(sec)-1].(map[string]any)) == 0
		if !bearer || anonymous != (pw == "") || len(sec) != 2 {
			t.Errorf("keys, password %q: schemes %v, security %v", pw, schemes, sec)
		}
	}
}
