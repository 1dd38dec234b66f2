package builtin

import (
	"strings"

	"github.com/agentd/agentd/internal/textdiff"
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
