//go:build !linux

package tmpfs

import "errors"

var errUnsupported = errors.New("tmpfs mounts are only made on Linux")

func mount(dir, opts string) error            { return errUnsupported }
func remount(dir string, readOnly bool) error { return errUnsupported }
func unmount(dir string) error                { return errUnsupported }
