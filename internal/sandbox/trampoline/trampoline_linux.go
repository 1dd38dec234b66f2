package trampoline

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"
)

// Name is the argv[0] under which the server starts its own executable to
// confine a command. The arguments that follow: the ruleset's descriptor,
// flags ("n": the network is denied, "-": none), the command's path, then
// its argv.
const Name = "agentd-sandbox"

// init turns any binary that holds this package (agentd, and the test
// binaries) into the trampoline when started under Name. It runs before
// main, holding the main thread, and never returns then: it executes the
// command or exits 126.
func init() {
	if len(os.Args) >= 5 && os.Args[0] == Name {
		run(os.Args[1], os.Args[2], os.Args[3], os.Args[4:])
	}
}

func run(fdArg, flags, path string, argv []string) {
	// Confinement is the thread's: the thread that confines itself must be
	// the one that executes the command.
	runtime.LockOSThread()
	fd, err := strconv.Atoi(fdArg)
	what := "descriptor " + fdArg
	if err == nil {
		what, err = confine(fd, flags == "n")
	}
	if err == nil {
		what, err = "exec "+path, syscall.Exec(path, argv, os.Environ())
	}
	os.Stderr.WriteString("agentd sandbox: " + what + ": " + err.Error() + "\n")
	os.Exit(126)
}

// Linux's numbers this package needs; syscall's frozen tables lack the
// newer ones. Landlock's system calls have one number on every
// architecture.
const (
	sysLandlockRestrictSelf = 446
	prCapbsetDrop           = 24
	prSetNoNewPrivs         = 38
	prCapAmbient            = 47
	prCapAmbientClearAll    = 4
	capSetpcap              = 8
	capNetRaw               = 13
	linuxCapabilityVersion3 = 0x20080522
)

// confine drops the capabilities that reach around Landlock, then
// restricts the thread to the ruleset open as fd. It says what failed.
func confine(fd int, denyNetwork bool) (string, error) {
	if err := dropCapabilities(denyNetwork); err != nil {
		return "drop capabilities", err
	}
	if err := prctl(prSetNoNewPrivs, 1, 0); err != nil {
		return "no_new_privs", err
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, uintptr(fd), 0, 0); e != 0 {
		return "landlock_restrict_self", e
	}
	return "close the ruleset", syscall.Close(fd)
}

// Dangerous are the capabilities a root server's commands lose. Landlock
// confines paths, signals and TCP; these act on the machine around them:
// mounts and namespaces' setup (SYS_ADMIN 21), modules (16), raw I/O (17),
// reboot (22), tracing (19), the clock (25), BPF (39), MAC (32, 33), the
// network's setup (NET_ADMIN 12), the kernel log (34), audit (30, 37),
// checkpoints (40), immutable files (9), device nodes (MKNOD 27),
// accounting (20), terminals' setup (26), alarms (35), suspend (36), file
// handles (DAC_READ_SEARCH 2, open_by_handle_at), file capabilities (31),
// and CAP_PERFMON (38), with which, as with SYS_ADMIN, /proc/<pid>/environ
// and the other PTRACE_MODE_READ files of any process may be read
// whatever Landlock says of tracing. SETPCAP (8) goes last: dropping the
// others needs it.
var Dangerous = []int{21, 16, 17, 22, 19, 38, 39, 25, 32, 33, 12, 34, 30, 37, 40, 9, 27, 20, 26, 35, 36, 2, 31, capSetpcap}

// dropCapabilities removes the dangerous capabilities (and, with the
// network denied, raw sockets, which go around Landlock's TCP rules) from
// the bounding and inheritable sets, so that the command does not regain
// them when it is executed as root; ambient ones are cleared. Without
// CAP_SETPCAP (a server that is not root) there are none to drop.
func dropCapabilities(denyNetwork bool) error {
	if err := prctl(prCapAmbient, prCapAmbientClearAll, 0); err != nil && err != syscall.EINVAL {
		return err
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: linuxCapabilityVersion3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	if data[0].effective&(1<<capSetpcap) == 0 {
		return nil
	}
	caps := Dangerous
	if denyNetwork {
		caps = append([]int{capNetRaw}, caps...)
	}
	for _, c := range caps {
		data[c/32].inheritable &^= 1 << (c % 32)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return e
	}
	for _, c := range caps {
		// EINVAL: a capability this kernel does not know.
		if err := prctl(prCapbsetDrop, uintptr(c), 0); err != nil && err != syscall.EINVAL {
			return err
		}
	}
	return nil
}

func prctl(op, a, b uintptr) error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, op, a, b, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
