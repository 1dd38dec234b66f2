//go:build unix

package workspace

import "syscall"

// nonblock keeps an open of a FIFO from waiting for a writer.
const nonblock = syscall.O_NONBLOCK
