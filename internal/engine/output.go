package engine

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/textcut"
	"github.com/agentd/agentd/internal/tool"
)

// Bounds of what one tool call may put into the conversation (opencode's
// figures). Longer output is cut, and the whole of it is saved where the
// model can read it in pieces.
const (
	maxOutputLines = 2000
	maxOutputBytes = 50 << 10
)

// bound cuts a tool result that is too long for the conversation, saving
// the whole of it under the output directory and saying where.
func (r *runner) bound(p *core.Part, res tool.Result) tool.Result {
	out := res.Output
	cut, lines, shown, ok := textcut.Head(out, maxOutputLines, maxOutputBytes)
	if !ok {
		return res
	}
	if res.Metadata == nil {
		res.Metadata = map[string]any{}
	}
	res.Metadata["truncated"] = true
	path, err := r.saveOutput(p, out)
	if err != nil {
		r.e.log.Warn("save cut tool output", "part", p.ID, "err", err)
		res.Output = cut + fmt.Sprintf("\n\n[output cut: the first %d of %d lines shown (%d of %d bytes); the rest could not be saved]",
			shown, lines, len(cut), len(out))
		return res
	}
	res.Metadata["outputPath"] = path
	res.Output = cut + fmt.Sprintf("\n\n[output cut: the first %d of %d lines shown (%d of %d bytes). The whole output is in %s: "+
		"read it with the read tool (offset and limit) or search it with grep instead of running the command again.]",
		shown, lines, len(cut), len(out), path)
	return res
}

// saveOutput writes a tool call's whole output to a file of its own.
func (r *runner) saveOutput(p *core.Part, out string) (string, error) {
	dir := filepath.Join(r.e.cfg.OutputDir, p.SessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, p.ID+".txt")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
