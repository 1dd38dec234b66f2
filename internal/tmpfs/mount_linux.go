package tmpfs

import (
	"syscall"
	"time"
)

func mount(dir, opts string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, opts)
}

func remount(dir string, readOnly bool) error {
	flags := uintptr(syscall.MS_REMOUNT)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	// A process started elsewhere in the test binary holds a copy of every
	// descriptor between its fork and its exec (which closes them): a
	// file open for writing then makes the remount busy for a moment.
	var err error
	for range 100 {
		if err = syscall.Mount("tmpfs", dir, "tmpfs", flags, ""); err != syscall.EBUSY {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func unmount(dir string) error {
	// Detached, so that a file a test left open cannot fail its cleanup.
	return syscall.Unmount(dir, syscall.MNT_DETACH)
}
