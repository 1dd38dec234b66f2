package builtin

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/agentd/agentd/internal/tool"
)

// Files a user attaches to a prompt (package attach) are opened as the
// read tool opens them: resolved in the call's workspace, through its root
// (a symlink that leads out is refused when the file is opened), outside
// it only when the call was granted external_directory.

// Attached describes a file a user attached: a directory, or a regular
// file's size and its first bytes (enough to tell a picture from text).
type Attached struct {
	Path string // resolved
	Dir  bool
	Size int64
	Head []byte
}

// Inspect opens the path a call's input names in filePath, as the read
// tool would, and describes it. Its error reads well after "cannot read
// PATH: ".
func Inspect(call tool.Call, p string) (Attached, error) {
	abs, r := path(call, p, "filePath", true)
	if r != nil {
		return Attached{}, fmt.Errorf("%s", r.Output)
	}
	pl, err := locate(call, abs)
	if err != nil {
		return Attached{}, fmt.Errorf("%s", errText(err))
	}
	defer pl.close()
	st, err := pl.stat()
	if err != nil {
		return Attached{}, fmt.Errorf("%s", errText(err))
	}
	if st.IsDir() {
		return Attached{Path: abs, Dir: true}, nil
	}
	f, st, err := pl.openRegular()
	if err != nil {
		return Attached{}, fmt.Errorf("%s", errText(err))
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return Attached{}, fmt.Errorf("%s", errText(err))
	}
	return Attached{Path: abs, Size: st.Size(), Head: head[:n]}, nil
}

// ReadAttached reads a regular file whole, as Inspect opens it, refusing
// one of more than max bytes.
func ReadAttached(call tool.Call, p string, max int64) ([]byte, error) {
	abs, r := path(call, p, "filePath", true)
	if r != nil {
		return nil, fmt.Errorf("%s", r.Output)
	}
	pl, err := locate(call, abs)
	if err != nil {
		return nil, fmt.Errorf("%s", errText(err))
	}
	defer pl.close()
	b, _, err := pl.readAll(max)
	if err != nil {
		return nil, fmt.Errorf("%s", errText(err))
	}
	return b, nil
}

// IsDir reports whether p (absolute, or relative to the workspace) is a
// directory, wherever it is: whether the list tool's rules apply too.
func IsDir(workspace, p string) bool {
	abs, err := Resolve(workspace, p)
	if err != nil && !errors.Is(err, ErrOutside) {
		return false
	}
	st, err := os.Stat(abs)
	return err == nil && st.IsDir()
}
