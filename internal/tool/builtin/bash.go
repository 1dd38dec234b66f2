package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

// Limits of the bash tool.
const (
	bashDefaultTimeout = 2 * time.Minute
	bashMaxTimeout     = 10 * time.Minute
	// killGrace is how long a process group has between SIGTERM and
	// SIGKILL when it is stopped.
	killGrace = 200 * time.Millisecond
	// outputGrace is how long the output may stay open after the shell
	// exited (background children holding it).
	outputGrace = 200 * time.Millisecond
)

// Bash runs shell commands.
type Bash struct{}

// Name implements tool.Tool.
func (Bash) Name() string { return "bash" }

// Description implements tool.Tool.
func (Bash) Description() string { return describe("bash") }

// Schema implements tool.Tool.
func (Bash) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number","description":"milliseconds"},"workdir":{"type":"string"},"description":{"type":"string"}},"required":["command"]}`)
}

// tail is the last n bytes of s, cut at a line start when one is near.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 200 {
		s = s[i+1:]
	}
	return "…\n" + strings.ToValidUTF8(s, "")
}

// Run implements tool.Tool.
func (Bash) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		Command     string  `json:"command"`
		Timeout     float64 `json:"timeout"`
		Workdir     string  `json:"workdir"`
		Description string  `json:"description"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	if in.Command == "" {
		return tool.Errorf("command is required"), nil
	}
	dir := call.Directory
	if in.Workdir != "" {
		d, r := path(call, in.Workdir, "workdir", false)
		if r != nil {
			return *r, nil
		}
		dir = d
	}
	timeout := bashDefaultTimeout
	if in.Timeout > 0 {
		timeout = min(time.Duration(in.Timeout*float64(time.Millisecond)), bashMaxTimeout)
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	box := contain(call.Scope, call.ID)
	defer box.close()
	cmd := exec.Command("bash", "-c", in.Command)
	cmd.Dir = dir
	cmd.Env = box.env(call.Env)
	cmd.SysProcAttr = box.attr()
	// Once the shell has exited, background children that keep its output
	// open do not hold the call: they are killed below.
	cmd.WaitDelay = outputGrace
	out := newCapped(bashHeadCap, bashTailCap)
	if call.Progress != nil {
		out.progress = func(s string) { call.Progress(map[string]any{"output": s, "description": in.Description}) }
	}
	cmd.Stdout, cmd.Stderr = out, out
	release, err := call.Sandbox.Wrap(cmd, confinement(call, false))
	if err != nil {
		return tool.Result{}, err
	}
	defer release()
	if err := cmd.Start(); err != nil {
		return tool.Result{}, fmt.Errorf("start bash: %w", err)
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	stopped := false
	select {
	case err = <-done:
	case <-runCtx.Done():
		stopped = true
		err = stopGroup(pgid, box, done)
	}
	// Children left in the background, in the group or out of it, would
	// outlive the call; end them.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	box.kill()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil
		if st := cmd.ProcessState; st != nil && !st.Success() {
			err = &exec.ExitError{ProcessState: st}
		}
	}

	text := out.String()
	// opencode's clients show a bash call's output from its metadata.
	md := map[string]any{"description": in.Description, "truncated": out.cut() > 0, "output": tail(out.last(metadataOutput+1), metadataOutput)}
	exit := 0
	var ee *exec.ExitError
	switch {
	case stopped && ctx.Err() != nil:
		return tool.Result{Output: text + "\n(command stopped: the run was aborted)", Metadata: md, IsError: true}, nil
	case stopped:
		md["timeout"] = true
		return tool.Result{Output: text + fmt.Sprintf("\n(command timed out after %v)", timeout), Metadata: md, IsError: true}, nil
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		return tool.Result{}, fmt.Errorf("wait bash: %w", err)
	}
	md["exit"] = exit
	title := in.Description
	if title == "" {
		title = in.Command
	}
	res := tool.Result{Output: text, Title: title, Metadata: md}
	if exit != 0 {
		res.IsError = true
		res.Output = fmt.Sprintf("%s\n(exit status %d)", text, exit)
	}
	return res, nil
}

// stopGroup ends a call's processes: SIGTERM to the group, then, after a
// short grace, SIGKILL to the group and to everything in the container;
// it waits for the shell to be reaped.
func stopGroup(pgid int, box *container, done <-chan error) error {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	box.kill()
	return <-done
}
