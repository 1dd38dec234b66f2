package builtin

import (
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/tool"
)

// confinement is what the processes of a call may touch besides what
// every confined command may: its workspace; the directories outside it
// that the command names, when the call was granted external_directory;
// and the session's saved tool output, to read. readOnly commands
// (ripgrep) change nothing.
func confinement(call tool.Call, readOnly bool) sandbox.Spec {
	spec := sandbox.Spec{Dir: call.Directory, Readable: call.ReadDirs, ReadOnly: readOnly}
	if call.AllowExternal && !readOnly {
		for _, n := range (Bash{}).Needs(call) {
			if n.Permission == "external_directory" {
				spec.Writable = append(spec.Writable, n.Patterns...)
			}
		}
	}
	return spec
}
