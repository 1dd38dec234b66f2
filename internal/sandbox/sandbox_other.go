//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// ABI returns 0: Landlock is Linux's.
func ABI() int { return 0 }

// Reason says why commands cannot be confined here.
func Reason() error { return errors.New("Landlock is Linux's: commands run unconfined on this system") }

// Wrap changes nothing: New returns no Sandbox where Landlock is missing.
func (s *Sandbox) Wrap(cmd *exec.Cmd, spec Spec) (func(), error) { return func() {}, nil }
