package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/server"
)

// TestClientBytesBudgeted: what a client can make the server keep is
// bounded, and each refusal names its limit without writing anything.
func TestClientBytesBudgeted(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{})
	base := a.URL()
	r := call(t, "POST", base+"/session", "{}", nil)
	var sess struct{ ID string }
	json.Unmarshal(r.body, &sess)
	_, before, _ := a.Store.EventBounds(t.Context())

	huge := strings.Repeat("t", 9<<20)
	parts := make([]map[string]string, 300)
	for i := range parts {
		parts[i] = map[string]string{"type": "text", "text": "x"}
	}
	manyParts, _ := json.Marshal(map[string]any{"parts": parts})
	rules := make([]map[string]string, 300)
	for i := range rules {
		rules[i] = map[string]string{"permission": "bash", "pattern": "x", "action": "deny"}
	}
	manyRules, _ := json.Marshal(map[string]any{"permission": rules})
	for _, c := range []struct {
		method, path, body string
		want               string
	}{
		{"PATCH", "/session/" + sess.ID, `{"title":"` + huge + `"}`, "limit of 1024 bytes"},
		{"POST", "/session", `{"title":"` + strings.Repeat("t", 2000) + `"}`, "limit of 1024 bytes"},
		{"PATCH", "/session/" + sess.ID, `{"metadata":{"k":"` + strings.Repeat("m", 20000) + `"}}`, "limit of 16384 bytes"},
		{"POST", "/session/" + sess.ID + "/prompt_async", string(manyParts), "limit of 256"},
		{"POST", "/session/" + sess.ID + "/prompt_async", `{"system":"` + strings.Repeat("s", 70000) + `","parts":[{"type":"text","text":"x"}]}`, "limit of 65536 bytes"},
		{"POST", "/session", string(manyRules), "limit of 256"},
	} {
		r := call(t, c.method, base+c.path, c.body, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), c.want) {
			t.Errorf("%s %s (%d bytes): %d %.200s, want 400 naming %q", c.method, c.path, len(c.body), r.status, r.body, c.want)
		}
	}
	if _, after, _ := a.Store.EventBounds(t.Context()); after != before {
		t.Errorf("refused requests wrote %d events", after-before)
	}
	// A body over the limit is 413.
	r = call(t, "PATCH", base+"/session/"+sess.ID, `{"title":"`+strings.Repeat("t", 11<<20)+`"}`, nil)
	if r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("11 MiB body: %d", r.status)
	}
}

// TestListCursor: GET /session pages through every session with the
// cursor, in order.
func TestListCursor(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{})
	base := a.URL()
	for i := range 7 {
		call(t, "POST", base+"/session", fmt.Sprintf(`{"title":"s%d"}`, i), nil)
	}
	var all []struct{ ID string }
	json.Unmarshal(call(t, "GET", base+"/session", "", nil).body, &all)
	r := call(t, "GET", base+"/session?limit=3", "", nil)
	var page []struct {
		ID   string
		Time struct{ Updated int64 }
	}
	json.Unmarshal(r.body, &page)
	next := fmt.Sprintf("%d.%s", page[2].Time.Updated, page[2].ID)
	var rest []struct{ ID string }
	json.Unmarshal(call(t, "GET", base+"/session?cursor="+next, "", nil).body, &rest)
	if len(all) != 7 || len(rest) != 4 || rest[0].ID != all[3].ID {
		t.Errorf("cursor page: %d of %d", len(rest), len(all))
	}
	if r := call(t, "GET", base+"/session?cursor=nonsense", "", nil); r.status != http.StatusBadRequest {
		t.Errorf("bad cursor: %d", r.status)
	}
}
