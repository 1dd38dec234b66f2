package builtin

import (
	"os"
	"path/filepath"

	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/vcs"
	"github.com/agentd/agentd/internal/worktree"
)

// confinement is what the processes of a call may touch besides what
// every confined command may: its workspace; the directories outside it
// that the command names, when the call was granted external_directory;
// the git directories a linked worktree's git writes (worktreeGit); and
// the session's saved tool output, to read. readOnly commands (ripgrep)
// change nothing.
func confinement(call tool.Call, readOnly bool) sandbox.Spec {
	spec := sandbox.Spec{Dir: call.Directory, Readable: call.ReadDirs, ReadOnly: readOnly}
	if readOnly {
		return spec
	}
	if call.AllowExternal {
		for _, n := range (Bash{}).Needs(call) {
			if n.Permission == "external_directory" {
				spec.Writable = append(spec.Writable, n.Patterns...)
			}
		}
	}
	spec.Writable = append(spec.Writable, worktreeGit(call.Directory)...)
	return spec
}

// worktreeGit returns, for a workspace that is a linked worktree's root,
// what git add and commit there write outside it: the worktree's folder
// in the repository's .git (its HEAD, index and logs) and the shared
// objects, refs and logs. A workspace that holds its own .git writes
// those in itself; a worktree's lie in the main repository. Never the
// repository's configuration or hooks. Only a worktree that the
// repository's .git names back counts (worktree.Open), so a .git file the
// model wrote cannot point the grant elsewhere.
func worktreeGit(dir string) []string {
	root, ok := vcs.Root(dir)
	if !ok || filepath.Clean(dir) != root {
		return nil
	}
	repo, err := worktree.Open(dir)
	if err != nil || repo.Root == root {
		return nil
	}
	admin, err := worktree.Admin(root)
	if err != nil {
		return nil
	}
	out := []string{admin}
	for _, d := range []string{"objects", "refs", "logs"} {
		p := filepath.Join(repo.Common, d)
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			out = append(out, p)
		}
	}
	return out
}
