package torture

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKillV2Session kills agentd (SIGKILL) while a run admitted through
// opencode 2's API streams, and reads the session back through that API
// after the restart: the run resumed once — one synthetic note in the
// history and the transcript — and ended once, succeeded.
func TestKillV2Session(t *testing.T) {
	srv, _, dbPath := crashNode(t, 100*time.Millisecond, `{}`)
	call := func(method, path string, body any, out any) int {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.url+path, rd)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
			}
		}
		return resp.StatusCode
	}
	var created struct {
		Data struct{ ID string } `json:"data"`
	}
	if code := call("POST", "/api/session", map[string]any{}, &created); code != 200 {
		t.Fatalf("create: %d", code)
	}
	sp := "/api/session/" + created.Data.ID
	if code := call("POST", sp+"/prompt", map[string]any{"prompt": map[string]string{"text": "sleep:30\nreply:done"}}, nil); code != 200 {
		t.Fatalf("prompt: %d", code)
	}
	type entry struct {
		Type    string `json:"type"`
		Outcome string `json:"outcome"`
		Text    string `json:"text"`
		Content []any  `json:"content"`
	}
	var page struct {
		Data []entry `json:"data"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		call("GET", sp+"/message?order=asc", nil, &page)
		if n := len(page.Data); n > 1 && page.Data[n-1].Type == "assistant" && len(page.Data[n-1].Content) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never streamed: %+v", page.Data)
		}
	}
	srv.kill()
	srv.start()
	if code := call("POST", sp+"/wait", nil, nil); code != 204 {
		t.Fatalf("wait after the restart: %d", code)
	}
	var hist struct {
		Data []struct {
			Type string `json:"type"`
		} `json:"data"`
	}
	call("GET", sp+"/history", nil, &hist)
	counts := map[string]int{}
	for _, e := range hist.Data {
		counts[e.Type]++
	}
	if counts["session.execution.started"] != 1 || counts["session.execution.succeeded"] != 1 || counts["session.next.synthetic"] != 1 {
		t.Errorf("history after a kill: %v; want one start, one resume note, one end", counts)
	}
	call("GET", sp+"/message?order=asc", nil, &page)
	kinds := map[string]int{}
	for _, e := range page.Data {
		kinds[e.Type]++
		if e.Type == "idle" && e.Outcome != "succeeded" {
			t.Errorf("idle entry %+v", e)
		}
	}
	if kinds["synthetic"] != 1 || kinds["idle"] != 1 {
		t.Errorf("transcript after a kill: %v; want one resume note and one idle entry", kinds)
	}
	srv.stop()
	checkStore(t, dbPath)
}
