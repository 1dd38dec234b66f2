// Package smallfile reads the small files agentd takes from places the
// model or a project writes to (a git directory's pointers, command and
// skill files): only a regular file, never waiting on a FIFO put in its
// place, and never more than a bound.
package smallfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadIn reads the regular file p of root; one over max bytes is an
// error.
func ReadIn(root *os.Root, p string, max int) ([]byte, error) {
	fh, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(fh, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("over the limit of %d bytes", max)
	}
	return data, nil
}

// ReadNoFollow reads the first 64 KiB of the regular file p, without
// following a link at p.
func ReadNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	return io.ReadAll(io.LimitReader(bufio.NewReader(f), 64<<10))
}
