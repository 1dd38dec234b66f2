package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Access rights of Landlock, by the ABI version that introduced them.
const (
	fsExecute    = unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWriteFile  = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	fsReadFile   = unix.LANDLOCK_ACCESS_FS_READ_FILE
	fsReadDir    = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsRemoveDir  = unix.LANDLOCK_ACCESS_FS_REMOVE_DIR
	fsRemoveFile = unix.LANDLOCK_ACCESS_FS_REMOVE_FILE
	fsMakeChar   = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR
	fsMakeDir    = unix.LANDLOCK_ACCESS_FS_MAKE_DIR
	fsMakeReg    = unix.LANDLOCK_ACCESS_FS_MAKE_REG
	fsMakeSock   = unix.LANDLOCK_ACCESS_FS_MAKE_SOCK
	fsMakeFifo   = unix.LANDLOCK_ACCESS_FS_MAKE_FIFO
	fsMakeBlock  = unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
	fsMakeSym    = unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRefer      = unix.LANDLOCK_ACCESS_FS_REFER     // ABI 2
	fsTruncate   = unix.LANDLOCK_ACCESS_FS_TRUNCATE  // ABI 3
	fsIoctlDev   = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV // ABI 5

	netBindTCP    = unix.LANDLOCK_ACCESS_NET_BIND_TCP    // ABI 4
	netConnectTCP = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP // ABI 4

	scopeAbstractUnix = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET // ABI 6
	scopeSignal       = unix.LANDLOCK_SCOPE_SIGNAL               // ABI 6
)

// What a rule grants. A right on a directory holds for everything
// beneath it; only the file rights may be granted on a file.
const (
	fileRights = fsExecute | fsWriteFile | fsReadFile | fsTruncate | fsIoctlDev
	readRights = fsExecute | fsReadFile | fsReadDir
	// writeRights are the workspace's: everything but making device nodes
	// (a block device made in the workspace would open the disk) and
	// device ioctls.
	writeRights = readRights | fsWriteFile | fsTruncate | fsRemoveDir | fsRemoveFile | fsMakeDir |
		fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeSym | fsRefer
	deviceRights = fsReadFile | fsWriteFile | fsTruncate | fsIoctlDev | fsReadDir
)

// handledFS is every filesystem right the ABI knows: what is handled and
// not granted is denied.
func handledFS(abi int) uint64 {
	h := uint64(fsExecute | fsWriteFile | fsReadFile | fsReadDir | fsRemoveDir | fsRemoveFile | fsMakeChar |
		fsMakeDir | fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeBlock | fsMakeSym)
	if abi >= 2 {
		h |= fsRefer
	}
	if abi >= 3 {
		h |= fsTruncate
	}
	if abi >= 5 {
		h |= fsIoctlDev
	}
	return h
}

// rulesetAttr is struct landlock_ruleset_attr up to the fields this code
// sets; the size passed to the kernel says which of them it reads.
type rulesetAttr struct {
	fs, net, scoped uint64
}

// pathBeneath is struct landlock_path_beneath_attr, which the kernel packs
// into 12 bytes: it reads the first 12 of this struct.
type pathBeneath struct {
	access uint64
	fd     int32
	_      int32
}

// abi is the kernel's Landlock ABI version; 0 without Landlock (not built
// in, disabled at boot, or a kernel older than 5.13).
var abi = sync.OnceValue(func() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
})

// ABI returns the Landlock ABI version of the running kernel, 0 when it
// has none.
func ABI() int { return abi() }

// newRuleset creates a ruleset that handles what abi knows, denies TCP
// when deny is set (ABI 4) and scopes signals and abstract unix sockets
// (ABI 6).
func newRuleset(abi int, denyNetwork bool) (*os.File, error) {
	attr := rulesetAttr{fs: handledFS(abi)}
	size := unsafe.Sizeof(attr.fs)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.net)
		if denyNetwork {
			attr.net = netBindTCP | netConnectTCP
		}
	}
	if abi >= 6 {
		size += unsafe.Sizeof(attr.scoped)
		attr.scoped = scopeAbstractUnix | scopeSignal
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return nil, fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	return os.NewFile(fd, "landlock-ruleset"), nil
}

// addRule grants access beneath the file or directory open as fd.
func addRule(ruleset *os.File, fd int, access uint64) error {
	attr := pathBeneath{access: access, fd: int32(fd)}
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, ruleset.Fd(), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if e != 0 {
		return fmt.Errorf("landlock_add_rule: %w", e)
	}
	return nil
}

// errNoLandlock is the error of a kernel without Landlock.
var errNoLandlock = errors.New("the kernel has no Landlock (Linux 5.13 or later, with landlock among the LSMs)")
