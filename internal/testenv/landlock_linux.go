package testenv

import "golang.org/x/sys/unix"

// landlockABI asks the kernel for its Landlock ABI version (0: none).
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}
