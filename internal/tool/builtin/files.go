package builtin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/tool"
)

const (
	readDefaultLimit = 2000
	readMaxLine      = 2000
)

// Read reads text files.
type Read struct{}

// Name implements tool.Tool.
func (Read) Name() string { return "read" }

// ReadOnly says read changes no file.
func (Read) ReadOnly() bool { return true }

// Description implements tool.Tool.
func (Read) Description() string { return describe("read") }

// Schema implements tool.Tool.
func (Read) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"filePath":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["filePath"]}`)
}

// Run implements tool.Tool.
func (Read) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		FilePath string `json:"filePath"`
		Offset   int    `json:"offset"`
		Limit    int    `json:"limit"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	p, r := path(call, in.FilePath, "filePath", true)
	if r != nil {
		return *r, nil
	}
	if in.Offset < 0 || in.Limit < 0 {
		return tool.Errorf("offset and limit must not be negative"), nil
	}
	pl, err := locate(call, p)
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot read %s: %v", in.FilePath, errText(err))), nil
	}
	defer pl.close()
	f, _, err := pl.openRegular()
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot read %s: %v", in.FilePath, errText(err))), nil
	}
	defer f.Close()
	limit := in.Limit
	if limit == 0 {
		limit = readDefaultLimit
	}
	// The file is streamed: only the lines asked for are kept, so a huge
	// file costs what is shown, not its size.
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(8192)
	if isBinary(head) {
		return tool.Errorf(fmt.Sprintf("%s is a binary file; read shows text files only", in.FilePath)), nil
	}
	var sb strings.Builder
	var buf []byte
	n, shown := 0, 0
	for {
		if n%1024 == 0 && ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		keep := n >= in.Offset && shown < limit
		line, err := readLine(br, buf, readMaxLine, keep)
		if keep && line != nil {
			buf = line[:0]
		}
		if err == io.EOF && line == nil {
			break
		}
		if err != nil && err != io.EOF {
			return tool.Errorf(fmt.Sprintf("cannot read %s: %v", in.FilePath, errText(err))), nil
		}
		n++
		if n > in.Offset && shown < limit {
			fmt.Fprintf(&sb, "%05d| %s\n", n, line)
			shown++
		}
		if err == io.EOF {
			break
		}
	}
	if end := in.Offset + shown; end < n {
		fmt.Fprintf(&sb, "(file has %d lines; read more with offset %d)\n", n, end)
	}
	return tool.Result{Output: sb.String(), Title: rel(call.Directory, p), Metadata: map[string]any{"lines": n}}, nil
}

// readLine reads one line (without its newline) into buf, keeping at most
// max bytes of it and marking a cut. With keep false the line is only
// consumed: counting the lines before an offset copies nothing. It returns
// io.EOF with the last line, and a nil line when there is none.
func readLine(br *bufio.Reader, buf []byte, max int, keep bool) ([]byte, error) {
	line := buf[:0]
	total := 0
	for {
		frag, err := br.ReadSlice('\n')
		total += len(frag)
		if keep && len(line) < max {
			line = append(line, frag[:min(len(frag), max-len(line))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && total == 0 {
			return nil, io.EOF
		}
		if !keep {
			return []byte{}, err
		}
		content := total
		if n := len(frag); n > 0 && frag[n-1] == '\n' {
			content--
			if n > 1 && frag[n-2] == '\r' {
				content--
			}
		}
		line = bytes.TrimRight(line, "\r\n")
		if content > max {
			line = append(line, "… (line cut)"...)
		}
		return line, err
	}
}

func isBinary(data []byte) bool {
	head := data[:min(len(data), 8192)]
	return bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(head[:max(0, len(head)-4)])
}

func errText(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "no such file"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	case errors.Is(err, errNotRegular):
		return "not a regular file (a FIFO, a device or a socket): refused"
	case strings.Contains(err.Error(), "escapes from parent"):
		return "the path leads out of the workspace through a symlink: refused"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Write writes files atomically.
type Write struct{}

// Name implements tool.Tool.
func (Write) Name() string { return "write" }

// Description implements tool.Tool.
func (Write) Description() string { return describe("write") }

// Schema implements tool.Tool.
func (Write) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"filePath":{"type":"string"},"content":{"type":"string"}},"required":["filePath","content"]}`)
}

// Run implements tool.Tool.
func (Write) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in struct {
		FilePath string  `json:"filePath"`
		Content  *string `json:"content"`
	}
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	if in.Content == nil {
		return tool.Errorf("content is required"), nil
	}
	p, r := path(call, in.FilePath, "filePath", false)
	if r != nil {
		return *r, nil
	}
	pl, err := locate(call, p)
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot write %s: %v", in.FilePath, errText(err))), nil
	}
	defer pl.close()
	perm := os.FileMode(0o644)
	st, statErr := pl.stat()
	existed := statErr == nil
	if existed {
		if st.IsDir() {
			return tool.Errorf(fmt.Sprintf("%s is a directory", in.FilePath)), nil
		}
		if !st.Mode().IsRegular() {
			return tool.Errorf(fmt.Sprintf("%s is not a regular file", in.FilePath)), nil
		}
		perm = st.Mode().Perm()
	}
	if err := pl.writeAtomic([]byte(*in.Content), perm); err != nil {
		return tool.Errorf(fmt.Sprintf("cannot write %s: %v", in.FilePath, errText(err))), nil
	}
	md := writeMetadata(p, existed)
	md["existed"], md["bytes"] = existed, len(*in.Content)
	return tool.Result{Output: fmt.Sprintf("wrote %d bytes to %s", len(*in.Content), rel(call.Directory, p)),
		Title: rel(call.Directory, p), Metadata: md}, nil
}

// Edit replaces text in files.
type Edit struct{}

// Name implements tool.Tool.
func (Edit) Name() string { return "edit" }

// Description implements tool.Tool.
func (Edit) Description() string { return describe("edit") }

// Schema implements tool.Tool.
func (Edit) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"filePath":{"type":"string"},"oldString":{"type":"string"},"newString":{"type":"string"},"replaceAll":{"type":"boolean"}},"required":["filePath","oldString","newString"]}`)
}

// editInput is the edit tool's input.
type editInput struct {
	FilePath   string `json:"filePath"`
	OldString  string `json:"oldString"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll"`
}

// apply makes the edit in an existing file's text: the new text and the
// replacements made, or what is wrong with the edit.
func (in editInput) apply(text string) (string, int, string) {
	if in.OldString == "" {
		return "", 0, "oldString must not be empty for an existing file"
	}
	if in.OldString == in.NewString {
		return "", 0, "oldString and newString are the same; nothing to change"
	}
	n := strings.Count(text, in.OldString)
	switch {
	case n == 0:
		return "", 0, fmt.Sprintf("oldString was not found in %s", in.FilePath)
	case n > 1 && !in.ReplaceAll:
		return "", 0, fmt.Sprintf("oldString occurs %d times in %s; give more context to make it unique, or set replaceAll", n, in.FilePath)
	}
	if in.ReplaceAll {
		return strings.ReplaceAll(text, in.OldString, in.NewString), n, ""
	}
	return strings.Replace(text, in.OldString, in.NewString, 1), n, ""
}

// Run implements tool.Tool.
func (Edit) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	var in editInput
	if r := decode(call.Input, &in); r != nil {
		return *r, nil
	}
	p, r := path(call, in.FilePath, "filePath", false)
	if r != nil {
		return *r, nil
	}
	pl, err := locate(call, p)
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot edit %s: %v", in.FilePath, errText(err))), nil
	}
	defer pl.close()
	data, st, err := pl.readAll(maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) && in.OldString == "" {
		if err := pl.writeAtomic([]byte(in.NewString), 0o644); err != nil {
			return tool.Errorf(fmt.Sprintf("cannot write %s: %v", in.FilePath, errText(err))), nil
		}
		return tool.Result{Output: "created " + rel(call.Directory, p), Title: rel(call.Directory, p), Metadata: editMetadata(p, "", in.NewString)}, nil
	}
	if err != nil {
		return tool.Errorf(fmt.Sprintf("cannot read %s: %v", in.FilePath, errText(err))), nil
	}
	text, n, problem := in.apply(string(data))
	if problem != "" {
		return tool.Errorf(problem), nil
	}
	if err := pl.writeAtomic([]byte(text), st.Mode().Perm()); err != nil {
		return tool.Errorf(fmt.Sprintf("cannot write %s: %v", in.FilePath, errText(err))), nil
	}
	md := editMetadata(p, string(data), text)
	md["replacements"] = max(1, btoi(in.ReplaceAll)*n)
	return tool.Result{Output: fmt.Sprintf("replaced %d occurrence(s) in %s", max(1, btoi(in.ReplaceAll)*n), rel(call.Directory, p)),
		Title: rel(call.Directory, p), Metadata: md}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
