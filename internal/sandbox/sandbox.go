// Package sandbox confines the commands agentd runs for the model (the
// bash tool, the user's shell command, ripgrep) with Landlock, so that a
// command the permission rules misjudged still cannot touch what it was
// not meant to: it writes only in its workspace, a private temporary
// directory and the places the operator or the call's grants name; it
// reads everything but the server's own data, configuration and secrets
// (and what the operator hides); its network is the operator's choice;
// it can neither signal the server nor reach its abstract sockets.
//
// A command is confined in a process of its own: the server starts its
// own executable under a fixed name (a trampoline, see trampoline_linux.go),
// which confines itself with the ruleset the server built and executes
// the command. The server's threads stay unconfined, and outside the
// command's domain: had a thread of the server confined itself to start
// the command, the command would share that thread's domain and could
// signal or trace it, which is to say the whole server.
//
// Every new way of running a command for the model (terminals, hooks)
// must start it through Sandbox.Wrap.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Mode says whether commands must be confined.
type Mode string

// The modes: auto confines commands where the kernel can and warns where
// it cannot; required refuses to start without confinement; off runs
// commands unconfined.
const (
	ModeAuto     Mode = "auto"
	ModeRequired Mode = "required"
	ModeOff      Mode = "off"
)

// Config is the operator's choice.
type Config struct {
	// Mode defaults to auto.
	Mode Mode
	// DenyNetwork denies commands TCP connections and listening (Landlock
	// ABI 4, Linux 6.7).
	DenyNetwork bool
	// Writable are places every command may change besides its workspace
	// and its temporary directory (caches such as ~/.cache/go-build).
	Writable []string
	// Hidden are places commands may not read or change: the server's
	// database and data directory, its configuration files, its TLS key,
	// and the operator's own list. A hidden place inside a workspace stays
	// hidden; the directories on the way to it then keep their entries but
	// cannot gain or lose any.
	Hidden []string
}

// Sandbox confines commands. A nil *Sandbox runs them unconfined.
type Sandbox struct {
	abi         int
	denyNetwork bool
	writable    []string
	hidden      []string
}

// Spec is what one command may touch besides what every command may.
type Spec struct {
	// Dir is the workspace, which the command may read and change.
	Dir string
	// Writable are more places this command may change (the directories
	// outside the workspace granted for the call).
	Writable []string
	// Readable are places it may read although they lie in a hidden one
	// (the session's saved tool output).
	Readable []string
	// ReadOnly commands change nothing: Dir is only read, Writable is
	// not granted, and they get no temporary directory.
	ReadOnly bool
}

// New returns the sandbox the configuration asks for. It is nil when the
// mode is off, and when it is auto on a kernel without Landlock (Reason
// says why); in required mode such a kernel is an error, as is a network
// denial the kernel cannot enforce.
func New(cfg Config) (*Sandbox, error) {
	switch cfg.Mode {
	case "", ModeAuto, ModeRequired:
	case ModeOff:
		return nil, nil
	default:
		return nil, fmt.Errorf("sandbox mode %q: want auto, required or off", cfg.Mode)
	}
	v := ABI()
	if v == 0 {
		if cfg.Mode == ModeRequired {
			return nil, fmt.Errorf("sandbox required: %w", Reason())
		}
		return nil, nil
	}
	if cfg.DenyNetwork && v < 4 && cfg.Mode == ModeRequired {
		return nil, fmt.Errorf("sandbox required with the network denied: Landlock ABI %d cannot deny it (ABI 4, Linux 6.7)", v)
	}
	s := &Sandbox{abi: v, denyNetwork: cfg.DenyNetwork}
	var err error
	if s.writable, err = resolveAll(cfg.Writable); err != nil {
		return nil, fmt.Errorf("sandbox writable: %w", err)
	}
	if s.hidden, err = resolveAll(cfg.Hidden); err != nil {
		return nil, fmt.Errorf("sandbox hidden: %w", err)
	}
	return s, nil
}

// String says what confines commands, for the start-up log and the node's
// description: "landlock ABI 7, network allowed".
func (s *Sandbox) String() string {
	if s == nil {
		return "off"
	}
	net := "network allowed"
	switch {
	case s.denyNetwork && s.abi >= 4:
		net = "network denied (TCP)"
	case s.denyNetwork:
		net = fmt.Sprintf("network NOT denied (needs Landlock ABI 4, the kernel has %d)", s.abi)
	}
	return fmt.Sprintf("landlock ABI %d, %s", s.abi, net)
}

// Missing lists what the kernel's Landlock cannot enforce of the promises
// in the package comment, for a warning at start; empty on ABI 6 and
// later.
func (s *Sandbox) Missing() []string {
	if s == nil {
		return nil
	}
	var m []string
	if s.abi < 2 {
		m = append(m, "files cannot be moved between directories (ABI 2)")
	}
	if s.abi < 3 {
		m = append(m, "truncating a readable file is not denied (ABI 3)")
	}
	if s.denyNetwork && s.abi < 4 {
		m = append(m, "the network is not denied (ABI 4)")
	}
	if s.abi < 6 {
		m = append(m, "commands can signal the server and reach abstract unix sockets (ABI 6)")
	}
	return m
}

// Overlaps describes how the hidden paths meet a workspace dir, for a
// warning at start: a hidden path inside it takes from the directories on
// the way to it the right to gain or lose entries; a workspace inside a
// hidden directory is not hidden from its commands.
func (s *Sandbox) Overlaps(dir string) []string {
	if s == nil || dir == "" {
		return nil
	}
	real, err := resolve(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, h := range s.hidden {
		if _, err := os.Lstat(h); err != nil {
			continue
		}
		switch {
		case h != real && within(real, h):
			out = append(out, fmt.Sprintf("%s lies in the workspace %s: it stays hidden, and commands cannot create or remove entries in the directories on the way to it", h, real))
		case within(h, real):
			out = append(out, fmt.Sprintf("the workspace %s lies in the hidden %s: its commands can read and change the workspace", real, h))
		}
	}
	return out
}

// resolveAll resolves each path: "~" expanded, absolute, symlinks in its
// longest existing part followed.
func resolveAll(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		r, err := resolve(p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func resolve(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		p = filepath.Join(home, p[1:])
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q: want an absolute path (or one from ~/)", p)
	}
	p = filepath.Clean(p)
	// Follow the links of the longest part that exists; the rest is kept
	// as written.
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest), nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if dir == "/" {
			return p, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// within reports whether p is dir or lies beneath it (both clean and
// absolute).
func within(dir, p string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
