package app_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/mcp"
	"github.com/agentd/agentd/internal/testbin"
)

// mcpServerBin is the test MCP server, built once.
func mcpServerBin(t *testing.T) string { return testbin.MCPServer(t) }

// TestMCPTools: an MCP server's tools reach the model through the run
// loop, GET /mcp reports the servers, and permission rules apply to MCP
// tools by name.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	bin := mcpServerBin(t)
	n := startNode(t, func(c *app.Config) {
		c.MCP = map[string]mcp.Server{
			"test":   {Type: "local", Command: []string{bin}},
			"broken": {Type: "local", Command: []string{filepath.Join(t.TempDir(), "missing")}},
		}
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "test_fail", Pattern: "*", Action: core.ActionDeny})
	})
	// The servers connect in the background, after the node listens.
	var st map[string]mcp.Status
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(n.app.URL() + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		st = nil
		json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if st["test"].Status == mcp.StatusConnected || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st["test"].Status != mcp.StatusConnected || st["broken"].Status != mcp.StatusFailed {
		t.Errorf("GET /mcp = %+v", st)
	}
	sid := n.session()
	n.send(sid, `tool:test_echo:{"text":"through MCP"}`+"\nreply:ok")
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolCompleted || p.State.Output != "echo: through MCP" {
		t.Errorf("MCP tool call: %+v", p)
	}
	n.send(sid, `tool:test_fail:{}`+"\nreply:ok")
	if p := n.lastToolPart(sid); p == nil || p.State.Status != core.ToolError || !strings.Contains(p.State.Error, "permission denied") {
		t.Errorf("denied MCP tool: %+v", p)
	}
}
