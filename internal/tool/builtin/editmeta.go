package builtin

import (
	"encoding/json"
	"errors"
	"io/fs"
	"strings"

	"github.com/agentd/agentd/internal/textdiff"
	"github.com/agentd/agentd/internal/tool"
)

// maxDiffBytes bounds the patch an edit's metadata carries (twice: as
// diff and in filediff): a whole file rewritten costs the transcript at
// most this, whole hunks kept, the counts exact.
const maxDiffBytes = 16 << 10

// editMetadata is what opencode's edit tool reports of an edit, in its
// shapes, which its TUI, web app and plugins read: diff (the unified
// patch, line endings as \n), filediff {file, patch, additions,
// deletions} and diagnostics (agentd runs no language server: none).
func editMetadata(abs, before, after string) map[string]any {
	r := textdiff.Unified(abs, normalize(before), normalize(after), textdiff.Options{MaxBytes: maxDiffBytes})
	return map[string]any{
		"diff":        r.Patch,
		"filediff":    map[string]any{"file": abs, "patch": r.Patch, "additions": r.Additions, "deletions": r.Deletions},
		"diagnostics": map[string]any{},
	}
}

// writeMetadata is what opencode's write tool reports: diagnostics (the
// TUI shows the written file once they are there), the path, and whether
// the file existed.
func writeMetadata(abs string, existed bool) map[string]any {
	return map[string]any{"diagnostics": map[string]any{}, "filepath": abs, "exists": existed}
}

func normalize(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// withDiff gives the edit need among needs the metadata opencode's ask
// dialog shows, {filepath, diff}, computed only if it asks: the file is
// read then, and after says what the call would make of it (false: the
// call would fail, no diff).
func withDiff(needs []tool.Need, call tool.Call, after func(before string, existed bool) (string, bool)) []tool.Need {
	for i := range needs {
		if needs[i].Permission != "edit" {
			continue
		}
		needs[i].Detail = func() map[string]any {
			var in struct {
				FilePath string `json:"filePath"`
			}
			if json.Unmarshal(call.Input, &in) != nil {
				return nil
			}
			abs, r := path(call, in.FilePath, "filePath", false)
			if r != nil {
				return nil
			}
			md := map[string]any{"filepath": abs}
			pl, err := locate(call, abs)
			if err != nil {
				return md
			}
			defer pl.close()
			data, _, err := pl.readAll(maxFileBytes)
			existed := err == nil
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return md
			}
			if text, ok := after(string(data), existed); ok {
				md["diff"] = textdiff.Unified(abs, normalize(string(data)), normalize(text), textdiff.Options{MaxBytes: maxDiffBytes}).Patch
			}
			return md
		}
	}
	return needs
}
