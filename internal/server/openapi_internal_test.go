package server

import "testing"

// TestEveryRouteDocumented keeps ops and the route table one to one: a
// route without its document entry, or an entry without its route,
// fails.
func TestEveryRouteDocumented(t *testing.T) {
	s := New(nil, nil, nil, Config{})
	seen := map[string]bool{}
	for _, rt := range s.routes {
		key := rt.method + " " + rt.pattern
		seen[key] = true
		if _, ok := ops[key]; !ok {
			t.Errorf("%s has no entry in ops (its parameters, body and answer)", key)
		}
	}
	for key := range ops {
		if !seen[key] {
			t.Errorf("ops documents %s, which is not a route", key)
		}
	}
}
