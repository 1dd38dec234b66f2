package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// trampolineName is the argv[0] under which the server starts its own
// executable to confine a command: fd of the ruleset, flags, the
// command's path, then its argv.
const trampolineName = "agentd-sandbox"

// init turns any binary that holds this package (agentd, and the test
// binaries) into the trampoline when started under its name. It runs
// before main, holding the main thread, and never returns then: it
// executes the command or exits 126.
func init() {
	if len(os.Args) >= 5 && os.Args[0] == trampolineName {
		trampoline(os.Args[1], os.Args[2], os.Args[3], os.Args[4:])
	}
}

func trampoline(fdArg, flags, path string, argv []string) {
	// Confinement is the thread's: the thread that confines itself must be
	// the one that executes the command.
	runtime.LockOSThread()
	fd, err := strconv.Atoi(fdArg)
	if err == nil {
		err = confine(fd, flags == "n")
	}
	if err == nil {
		err = unix.Exec(path, argv, os.Environ())
		err = fmt.Errorf("exec %s: %w", path, err)
	}
	fmt.Fprintf(os.Stderr, "agentd sandbox: %v\n", err)
	os.Exit(126)
}

// confine drops the capabilities that reach around Landlock, then
// restricts the thread to the ruleset open as fd.
func confine(fd int, denyNetwork bool) error {
	if err := dropCapabilities(denyNetwork); err != nil {
		return err
	}
	if err := restrictSelf(fd); err != nil {
		return err
	}
	return unix.Close(fd)
}

// dangerous are the capabilities a root server's commands lose. Landlock
// confines paths, signals and TCP; these act on the machine around them:
// modules, raw devices and I/O ports, BPF, mounts and namespaces' setup,
// reboot, the clock, file handles (open_by_handle_at), device nodes, and
// CAP_PERFMON and CAP_SYS_ADMIN, with which /proc/<pid>/environ and other
// PTRACE_MODE_READ files of any process may be read whatever Landlock
// says of tracing.
var dangerous = []int{
	unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE, unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT, unix.CAP_SYS_PTRACE,
	unix.CAP_PERFMON, unix.CAP_BPF, unix.CAP_SYS_TIME, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE,
	unix.CAP_NET_ADMIN, unix.CAP_SYSLOG, unix.CAP_AUDIT_CONTROL, unix.CAP_AUDIT_READ, unix.CAP_CHECKPOINT_RESTORE,
	unix.CAP_LINUX_IMMUTABLE, unix.CAP_MKNOD, unix.CAP_SYS_PACCT, unix.CAP_SYS_TTY_CONFIG, unix.CAP_WAKE_ALARM,
	unix.CAP_BLOCK_SUSPEND, unix.CAP_DAC_READ_SEARCH, unix.CAP_SETFCAP,
	unix.CAP_SETPCAP, // last: dropping the others needs it
}

// dropCapabilities removes the dangerous capabilities (and, with the
// network denied, raw sockets, which go around Landlock's TCP rules) from
// the bounding and inheritable sets, so that the command does not regain
// them when it is executed as root; ambient ones are cleared. Without
// CAP_SETPCAP (a server that is not root) there are none to drop.
func dropCapabilities(denyNetwork bool) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[unix.CAP_SETPCAP/32].Effective&(1<<(unix.CAP_SETPCAP%32)) == 0 {
		return nil
	}
	caps := dangerous
	if denyNetwork {
		caps = append([]int{unix.CAP_NET_RAW}, caps...)
	}
	for _, c := range caps {
		data[c/32].Inheritable &^= 1 << (c % 32)
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	for _, c := range caps {
		// EINVAL: a capability this kernel does not know.
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}
