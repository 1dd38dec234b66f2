package builtin

import (
	"syscall"

	"github.com/agentd/agentd/internal/tool"
)

// Container holds the processes of a long-lived command that is not a
// tool call but must be contained like one (a terminal): the same marker,
// cgroup and parent-death signal as a call's processes, so that ending it,
// a server's Stop, the reaper after a crash and the next start's Sweep
// all reach everything it started.
type Container struct{ c *container }

// Contain prepares a container named id in scope (the database's, as a
// call's Scope).
func Contain(scope, id string) *Container { return &Container{c: contain(scope, id)} }

// Env is the environment of the container's processes: e's variables and
// the marker, last, so that nothing before it can replace it.
func (c *Container) Env(e *tool.Env) []string { return c.c.env(e) }

// Marker is the environment variable (NAME=value) that marks the
// container's processes.
func (c *Container) Marker() string { return markerVar + "=" + c.c.marker }

// Attr returns the process attributes that put a leader in the
// container: its own process group, in the cgroup where there is one,
// killed if the server dies.
func (c *Container) Attr() *syscall.SysProcAttr { return c.c.attr() }

// Kill ends every process of the container, wherever it went.
func (c *Container) Kill() { c.c.kill() }

// Close kills what is left and removes the cgroup. Call it once the
// leader has been waited for.
func (c *Container) Close() { c.c.close() }
