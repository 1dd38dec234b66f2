package builtin

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentd/agentd/internal/tool"
)

//go:embed descriptions/*.txt
var descriptions embed.FS

func describe(name string) string {
	b, err := descriptions.ReadFile("descriptions/" + name + ".txt")
	if err != nil {
		panic("builtin: missing description for " + name)
	}
	return strings.TrimSpace(string(b))
}

// All returns the built-in tools.
func All() []tool.Tool {
	return []tool.Tool{Bash{}, Read{}, Write{}, Edit{}, Glob{}, Grep{}, List{}}
}

// decode reads a tool's input; a malformed input is a result the model
// sees, not a Go error.
func decode(raw json.RawMessage, v any) *tool.Result {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		r := tool.Errorf("invalid input: " + err.Error())
		return &r
	}
	return nil
}

// path resolves a path argument inside the call's workspace; outside paths
// and bad paths become results the model sees.
func path(call tool.Call, p, field string) (string, *tool.Result) {
	if p == "" {
		r := tool.Errorf(field + " is required")
		return "", &r
	}
	abs, err := Resolve(call.Directory, p)
	if errors.Is(err, ErrOutside) {
		r := tool.Errorf(fmt.Sprintf("%s %q is outside the workspace %s; reaching it needs the external_directory permission", field, p, call.Directory))
		r.Metadata = map[string]any{"permission": "external_directory", "path": abs}
		return "", &r
	}
	if err != nil {
		r := tool.Errorf(fmt.Sprintf("%s %q: %v", field, p, err))
		return "", &r
	}
	return abs, nil
}

func rel(ws, p string) string {
	if r, err := filepath.Rel(ws, p); err == nil {
		return r
	}
	return p
}

// WriteFileAtomic writes data to path durably: a temp file in the same
// directory, fsync, rename over the target, fsync the directory.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
