package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/sandbox/trampoline"
)

// devices are the device files commands write: they may be written and
// their ioctls used (a terminal's), wherever the command runs.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// Reason says why commands cannot be confined on this machine; nil when
// they can.
func Reason() error {
	if ABI() == 0 {
		return errNoLandlock
	}
	return nil
}

// Wrap makes cmd, built and not yet started, run confined by spec: it
// creates the command's temporary directory (TMPDIR in its environment),
// builds its ruleset, and has cmd start the trampoline, which confines
// itself and executes what cmd named. Call release once the command has
// ended: it closes the ruleset and removes the temporary directory. On a
// nil Sandbox it changes nothing.
func (s *Sandbox) Wrap(cmd *exec.Cmd, spec Spec) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if cmd.Process != nil {
		return nil, errors.New("sandbox: the command has started")
	}
	var tmp string
	if !spec.ReadOnly {
		if tmp, err = os.MkdirTemp("", "agentd-tmp-"); err != nil {
			return nil, fmt.Errorf("sandbox: temporary directory: %w", err)
		}
	}
	rs, err := s.ruleset(spec, tmp)
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if tmp != "" {
		env = setenv(env, "TMPDIR", tmp)
	}
	cmd.Env = env
	flags := "-"
	if s.denyNetwork {
		flags = "n"
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, rs)
	cmd.Args = append([]string{trampoline.Name, strconv.Itoa(fd), flags, cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
	return func() {
		rs.Close()
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}, nil
}

// ruleset builds the ruleset of one command: every path readable but the
// hidden ones, the device files writable, then the command's own grants.
func (s *Sandbox) ruleset(spec Spec, tmp string) (*os.File, error) {
	rs, err := newRuleset(s.abi, s.denyNetwork)
	if err != nil {
		return nil, err
	}
	handled := handledFS(s.abi)
	b := newBuilder(s.hidden, func(fd int, access uint64) error { return addRule(rs, fd, access&handled) })
	b.grant("/", readRights)
	for _, d := range devices {
		b.grant(d, deviceRights)
	}
	grant := func(paths []string, access uint64) {
		for _, p := range paths {
			if p == "" {
				continue
			}
			r, err := resolve(p)
			if err != nil {
				b.err = errors.Join(b.err, err)
				continue
			}
			b.grant(r, access)
		}
	}
	grant(spec.Readable, readRights)
	if spec.ReadOnly {
		grant([]string{spec.Dir}, readRights)
	} else {
		grant([]string{spec.Dir, tmp}, writeRights)
		grant(spec.Writable, writeRights)
		grant(s.writable, writeRights)
	}
	if b.err != nil {
		rs.Close()
		return nil, b.err
	}
	return rs, nil
}

// setenv sets name in env, replacing what it held.
func setenv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}
