package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
)

// TestWebFetchThroughAPI: the model's webfetch reaches a page on this
// machine only when the operator allows its address, and the webfetch
// permission rules apply to it like to any tool.
func TestWebFetchThroughAPI(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<h2>Fetched over HTTP</h2>")
	}))
	t.Cleanup(page.Close)
	prompt := `tool:webfetch:{"url":"` + page.URL + `"}` + "\nreply:done"

	refused := startNode(t)
	sid := refused.session()
	refused.send(sid, prompt)
	if p := refused.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "on this machine") {
		t.Errorf("fetch of this machine without the operator's allow: %+v", p)
	}

	allowed := startNode(t, func(c *app.Config) {
		c.WebFetchAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	sid = allowed.session()
	allowed.send(sid, prompt)
	if p := allowed.lastToolPart(sid); p == nil || p.State.Status != core.ToolCompleted || !strings.Contains(p.State.Output, "## Fetched over HTTP") {
		t.Errorf("allowed fetch: %+v", p)
	}

	denied := startNode(t, func(c *app.Config) {
		c.WebFetchAllow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "webfetch", Pattern: "*", Action: core.ActionDeny})
	})
	sid = denied.session()
	denied.send(sid, prompt)
	if p := denied.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || strings.Contains(p.State.Output, "Fetched") {
		t.Errorf("fetch the operator denies: %+v", p)
	}
}
