package attach

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/tool/builtin"
)

// fromFile is an attachment named by a file:// URL: read from the
// workspace here, as the model's own read tool would read it.
func fromFile(ctx context.Context, env Env, f File) ([]Part, error) {
	u, err := url.Parse(f.URL)
	if err != nil || !strings.HasPrefix(u.Path, "/") || (u.Host != "" && u.Host != "localhost") {
		return nil, errorf("url: %.200q is not the file: URL of a local path", f.URL)
	}
	path := u.Path
	call := tool.Call{Directory: env.Dir, Input: mustJSON(readInput{FilePath: path})}
	needs := builtin.Read{}.Needs(call)
	if builtin.IsDir(env.Dir, path) {
		needs = append(needs, builtin.List{}.Needs(tool.Call{Directory: env.Dir, Input: mustJSON(listInput{Path: path})})...)
	}
	action, what, external := allowed(env, needs)
	switch action {
	case core.ActionDeny:
		return nil, errorf("reading %s is denied by the permission rules (%s)", path, what)
	case core.ActionAsk:
		// Not read here: the model reads it with its tools, which ask.
		note := "The user attached " + path + ". Reading it needs the user's permission (" + what +
			"): read it with your tools, which ask the user."
		return []Part{{Text: note}, {File: &f}}, nil
	}
	call.AllowExternal = external
	att, err := builtin.Inspect(call, path)
	if err != nil {
		return failed("Read", path, readInput{FilePath: path}, err.Error()), nil
	}
	if att.Dir {
		return list(ctx, call, f, path)
	}
	if kind := llm.ModalityOf(baseMime(http.DetectContentType(att.Head))); kind != "" {
		return readMedia(env, call, f, path, kind)
	}
	return readText(ctx, call, f, u)
}

// listInput is the list tool's input, as the synthetic call shows it.
type listInput struct {
	Path string `json:"path"`
}

// list gives the model a directory's listing, as the list tool makes it.
func list(ctx context.Context, call tool.Call, f File, path string) ([]Part, error) {
	in := listInput{Path: path}
	call.Input = mustJSON(in)
	res, err := builtin.List{}.Run(ctx, call)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return failed("List", path, in, res.Output), nil
	}
	f.Mime = DirectoryMime
	return []Part{{Text: called("List", in)}, {Text: bound(res.Output)}, {File: &f}}, nil
}

// readText gives the model a text file's lines as the read tool shows
// them: the range the URL's ?start=&end= names (1-based, inclusive, as
// opencode's TUI writes them), else the tool's first lines.
func readText(ctx context.Context, call tool.Call, f File, u *url.URL) ([]Part, error) {
	in := readInput{FilePath: u.Path}
	q := u.Query()
	if start, err := strconv.Atoi(q.Get("start")); err == nil && start > 0 {
		in.Offset = start - 1
		if end, err := strconv.Atoi(q.Get("end")); err == nil && end >= start {
			in.Limit = end - start + 1
		}
	}
	call.Input = mustJSON(in)
	res, err := builtin.Read{}.Run(ctx, call)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return failed("Read", u.Path, in, res.Output), nil
	}
	return []Part{{Text: called("Read", in)}, {Text: bound(res.Output)}, {File: &f}}, nil
}

// readMedia reads a picture or a PDF whole into the file part, for a
// model that takes it.
func readMedia(env Env, call tool.Call, f File, path, kind string) ([]Part, error) {
	if err := takes(env.Model, kind, f); err != nil {
		return nil, err
	}
	max := int64(MaxImageBytes)
	if kind == llm.ModalityPDF {
		max = MaxPDFBytes
	}
	raw, err := builtin.ReadAttached(call, path, max)
	if err != nil {
		return nil, errorf("cannot read %s: %v", path, err)
	}
	parts, err := media(f, kind, raw)
	if err != nil {
		return nil, err
	}
	return append([]Part{{Text: called("Read", readInput{FilePath: path})}}, parts...), nil
}

// failed is opencode's account of a read that failed: the call, and its
// error, without the file part.
func failed(tool, path string, in any, msg string) []Part {
	return []Part{{Text: called(tool, in)},
		{Text: tool + " tool failed to read " + path + " with the following error: " + msg}}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
