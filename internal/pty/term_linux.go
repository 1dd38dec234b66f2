package pty

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// openPair opens a new pseudo-terminal: the master side, non-blocking so
// that Go's poller serves its reads (a Close or a deadline ends a read
// that waits), and the terminal side, for the shell, at size.
func openPair(size Size) (master, tty *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("unlock the terminal: %w", err)
	}
	sfd, err := peer(fd)
	if err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	if err := unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)}); err != nil {
		unix.Close(fd)
		unix.Close(sfd)
		return nil, nil, fmt.Errorf("size the terminal: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), os.NewFile(uintptr(sfd), "pty"), nil
}

// peer opens the terminal side of the master fd: by the master itself
// (TIOCGPTPEER, Linux 4.13), which needs no path that could have been
// replaced, else by its number under /dev/pts.
func peer(fd int) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno == 0 {
		return int(r), nil
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		return -1, fmt.Errorf("terminal number: %w", err)
	}
	sfd, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the terminal: %w", err)
	}
	return sfd, nil
}

// resize sets the terminal's size; the kernel sends the shell's
// foreground group SIGWINCH.
func resize(master *os.File, size Size) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(size.Rows), Col: uint16(size.Cols)})
	})
	if err != nil {
		return err
	}
	return ierr
}

// sessionAttr makes attr start the shell as a session leader whose
// controlling terminal is its standard input (the terminal side), as a
// terminal emulator does, so that job control and Ctrl-C work; a session
// leader leads its own process group, which takes the place of the
// container's Setpgid.
func sessionAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	attr.Setpgid = false
	attr.Setsid = true
	attr.Setctty = true
	attr.Ctty = 0
	return attr
}

// supported says whether this system can open terminals.
func supported() error { return nil }
