package builtin

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentd/agentd/internal/tool"
)

//go:embed descriptions/*.txt
var descriptions embed.FS

func describe(name string) string {
	d, ok := descriptionTexts()[name]
	if !ok {
		panic("builtin: missing description for " + name)
	}
	return d
}

// descriptionTexts reads the descriptions once: every step of every run
// asks for them, and a thousand runs each holding their own copies came to
// 7 MB.
var descriptionTexts = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	entries, _ := descriptions.ReadDir("descriptions")
	for _, e := range entries {
		b, err := descriptions.ReadFile("descriptions/" + e.Name())
		if err == nil {
			m[strings.TrimSuffix(e.Name(), ".txt")] = strings.TrimSpace(string(b))
		}
	}
	return m
})

// All returns the built-in tools.
func All() []tool.Tool {
	return []tool.Tool{Bash{}, Read{}, Write{}, Edit{}, Glob{}, Grep{}, List{}, TodoWrite{}, TodoRead{}, WebFetch{}}
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
// and bad paths become results the model sees. readOnly tools may also
// reach the call's ReadDirs.
func path(call tool.Call, p, field string, readOnly bool) (string, *tool.Result) {
	if p == "" {
		r := tool.Errorf(field + " is required")
		return "", &r
	}
	abs, err := Resolve(call.Directory, p)
	if errors.Is(err, ErrOutside) && (call.AllowExternal || readOnly && inReadDirs(call, abs)) {
		return abs, nil
	}
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
	if err := fill(f, data, perm); err != nil {
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

// inReadDirs reports whether abs is inside one of the call's ReadDirs.
func inReadDirs(call tool.Call, abs string) bool {
	for _, d := range call.ReadDirs {
		if real, err := realPath(d); err == nil && Within(real, abs) {
			return true
		}
	}
	return false
}

// externalNeed returns the external_directory need of a path argument that
// resolves outside the workspace (and, for readOnly tools, outside the
// call's ReadDirs).
func externalNeed(call tool.Call, p string, readOnly bool) []tool.Need {
	if p == "" {
		return nil
	}
	abs, err := Resolve(call.Directory, p)
	if !errors.Is(err, ErrOutside) || readOnly && inReadDirs(call, abs) {
		return nil
	}
	dir := abs
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		dir = filepath.Dir(abs)
	}
	return []tool.Need{{Permission: "external_directory", Patterns: []string{dir}, Always: []string{dir, dir + "/*"},
		Title: "Access " + abs + " outside the workspace", Metadata: map[string]any{"path": abs}}}
}

// pathNeeds decodes the named path field of a call's input and returns its
// needs: external_directory when outside, perm (if set) for the path, and
// for an edit in .git/ or .agentd/ edit_protected, which the default
// rules ask.
func pathNeeds(call tool.Call, field, perm string) []tool.Need {
	var in map[string]any
	if json.Unmarshal(call.Input, &in) != nil {
		return nil
	}
	p, _ := in[field].(string)
	if p == "" {
		p = "."
	}
	needs := externalNeed(call, p, perm != "edit")
	if perm != "" {
		abs, err := Resolve(call.Directory, p)
		if err != nil && !errors.Is(err, ErrOutside) {
			return needs
		}
		r := rel(call.Directory, abs)
		needs = append(needs, tool.Need{Permission: perm, Patterns: []string{r}, Always: []string{"*"}, Title: perm + " " + r})
		if perm == "edit" && Protected(r) {
			needs = append(needs, protectedNeed([]string{r}))
		}
	}
	return needs
}

// Needs implements tool.Permissioned.
func (Read) Needs(call tool.Call) []tool.Need { return pathNeeds(call, "filePath", "read") }

// Needs implements tool.Permissioned. An ask shows the write's diff.
func (Write) Needs(call tool.Call) []tool.Need {
	return withDiff(pathNeeds(call, "filePath", "edit"), call, func(before string, existed bool) (string, bool) {
		var in struct {
			Content *string `json:"content"`
		}
		if json.Unmarshal(call.Input, &in) != nil || in.Content == nil {
			return "", false
		}
		return *in.Content, true
	})
}

// Needs implements tool.Permissioned. An ask shows the edit's diff.
func (Edit) Needs(call tool.Call) []tool.Need {
	return withDiff(pathNeeds(call, "filePath", "edit"), call, func(before string, existed bool) (string, bool) {
		var in editInput
		if json.Unmarshal(call.Input, &in) != nil {
			return "", false
		}
		if !existed {
			return in.NewString, in.OldString == ""
		}
		after, _, problem := in.apply(before)
		return after, problem == ""
	})
}

// Needs implements tool.Permissioned.
func (Glob) Needs(call tool.Call) []tool.Need { return pathNeeds(call, "path", "glob") }

// Needs implements tool.Permissioned.
func (Grep) Needs(call tool.Call) []tool.Need { return pathNeeds(call, "path", "grep") }

// Needs implements tool.Permissioned.
func (List) Needs(call tool.Call) []tool.Need { return pathNeeds(call, "path", "list") }

// fill writes data to the new file f, gives it perm, syncs and closes it
// (closed on an error too).
func fill(f *os.File, data []byte, perm os.FileMode) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
