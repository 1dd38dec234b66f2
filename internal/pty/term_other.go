//go:build !linux

package pty

import (
	"errors"
	"os"
	"syscall"
)

var errUnsupported = errors.New("terminals are served on Linux only")

func openPair(Size) (master, tty *os.File, err error) { return nil, nil, errUnsupported }

func resize(*os.File, Size) error { return errUnsupported }

func sessionAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr { return attr }

func supported() error { return errUnsupported }
