package apiv2_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentd/agentd/internal/apiv2"
)

// TestDocDescribesV2 sends every opencode 2 operation of the server's own
// document (/doc) a request and checks the answer against the schema the
// document gives it, and that each is tagged and named as opencode's v2
// operation. (test/opencode judges the same answers by opencode's own
// document.)
func TestDocDescribesV2(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	raw := n.must(200, "GET", "/doc", nil).body
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("doc.json", inst); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Tags        []string                   `json:"tags"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	sid := n.session()
	mid := n.prompt(sid, `tool:bash:{"command":"echo hi"}`+"\nreply:done")
	n.wait(sid)
	fill := strings.NewReplacer("{sessionID}", sid, "{messageID}", mid, "{providerID}", "agentd", "{integrationID}", "openai",
		"{credentialID}", "openai", "{attemptID}", "att_1", "{ptyID}", "pty_1", "{requestID}", "per_1", "{id}", sid+".0", "*", "notes.txt")
	bodies := map[string]any{
		"POST /api/session":                                          map[string]any{},
		"POST /api/session/{sessionID}/agent":                        map[string]string{"agent": "build"},
		"POST /api/session/{sessionID}/model":                        map[string]any{"model": map[string]string{"id": "scripted", "providerID": "agentd"}},
		"POST /api/session/{sessionID}/prompt":                       map[string]any{"prompt": map[string]string{"text": "reply:again"}},
		"POST /api/session/{sessionID}/revert/stage":                 map[string]string{"messageID": mid},
		"POST /api/session/{sessionID}/permission":                   map[string]any{"action": "bash", "resources": []string{"ls"}},
		"POST /api/integration/{integrationID}/connect/key":          map[string]string{"key": "sk-doc"},
		"PATCH /api/credential/{credentialID}":                       map[string]string{"label": "doc"},
		"POST /api/session/{sessionID}/permission/{requestID}/reply": map[string]string{"reply": "once"},
		"POST /api/session/{sessionID}/question/{requestID}/reply":   map[string]any{"answers": [][]string{}},
	}
	writeNotes(t, n)
	judged := 0
	for path, item := range d.Paths {
		for method, op := range item {
			method = strings.ToUpper(method)
			if !strings.HasPrefix(path, "/api/") {
				continue
			}
			key := method + " " + path
			if !strings.HasPrefix(op.OperationID, "v2.") || len(op.Tags) != 1 || op.Tags[0] != apiv2.Tag {
				t.Errorf("%s: operation %q tagged %v, want opencode's v2 id and tag %q", key, op.OperationID, op.Tags, apiv2.Tag)
			}
			if strings.HasSuffix(path, "/event") {
				continue // streams: TestClientFlow and test/opencode read them
			}
			if method != "GET" {
				n.wait(sid) // one turn at a time
			}
			a := n.do(method, fill.Replace(path), bodies[key])
			status := fmt.Sprint(a.status)
			if _, ok := op.Responses[status]; !ok {
				status = "default"
				if a.status < 400 {
					t.Errorf("%s answered %d, which the document does not list: %.300s", key, a.status, a.body)
					continue
				}
			}
			ct := a.header.Get("Content-Type")
			if a.status == http.StatusNoContent || !strings.HasPrefix(ct, "application/json") {
				judged++
				continue
			}
			ptr := "doc.json#/paths/" + escape(path) + "/" + strings.ToLower(method) + "/responses/" + status + "/content/application~1json/schema"
			s, err := c.Compile(ptr)
			if err != nil {
				t.Fatalf("%s: compile %s: %v", key, ptr, err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.body))
			if err != nil {
				t.Errorf("%s: not JSON: %.200s", key, a.body)
				continue
			}
			if err := s.Validate(v); err != nil {
				t.Errorf("%s → %d does not match the document: %v\n%.400s", key, a.status, err, a.body)
			}
			judged++
		}
	}
	if judged < 50 {
		t.Errorf("judged %d operations, want the 58 of opencode's document less the streams", judged)
	}
}

var pointerEscape = regexp.MustCompile(`[~/{}]`)

// escape is a path as a JSON pointer token in a URI fragment.
func escape(p string) string {
	return pointerEscape.ReplaceAllStringFunc(p, func(s string) string {
		return map[string]string{"~": "~0", "/": "~1", "{": "%7B", "}": "%7D"}[s]
	})
}

// writeNotes puts a file in the node's workspace for the file routes.
func writeNotes(t *testing.T, n *node) {
	t.Helper()
	if err := writeFile(n.cfg.Directory+"/notes.txt", "alpha\nbeta\n"); err != nil {
		t.Fatal(err)
	}
}
