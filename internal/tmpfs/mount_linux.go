package tmpfs

import "syscall"

func mount(dir, opts string) error {
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, opts)
}

func remount(dir string, readOnly bool) error {
	flags := uintptr(syscall.MS_REMOUNT)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	return syscall.Mount("tmpfs", dir, "tmpfs", flags, "")
}

func unmount(dir string) error {
	// Detached, so that a file a test left open cannot fail its cleanup.
	return syscall.Unmount(dir, syscall.MNT_DETACH)
}
