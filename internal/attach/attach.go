// Package attach turns the files a prompt attaches into what the
// transcript keeps and the model reads, the way opencode's session prompt
// does, under agentd's rules.
//
// A file part becomes, in order, synthetic text parts — what the model
// reads of the file ("Called the Read tool with the following input: …"
// and the tool's output, opencode's convention) — and the file part
// itself, which clients show as the attachment:
//
//   - text sent as data (agentd run --file, opencode run --attach --file):
//     its text, as sent;
//   - a file:// URL (the TUI's @file, opencode run --file): read from the
//     session's workspace by the read tool (a line range from ?start=&end=),
//     or listed by the list tool when it is a directory; a picture or a PDF
//     is read whole and its part carries it as a data: URL;
//   - a picture (PNG, JPEG, GIF, WebP) or a PDF: the file part alone, which
//     the model sees as an image or a document — only when the model takes
//     that input.
//
// Reading is done once, at admission, so that every step, resume and
// replay sends the model the file as it was when the user sent it.
//
// What the rules say decides what is read: a file the read rules deny, or
// outside the workspace where external_directory is denied, refuses the
// prompt (an *Error); one they ask for is not read here — the model is
// told it was attached and reads it with its tools, which ask the user.
// A file the model cannot take (a picture for a model without image
// input, a binary of another kind) refuses the prompt too.
package attach

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/textcut"
	"github.com/agentd/agentd/internal/tool"
)

// Bounds of what an attachment read here may be: pictures and PDFs as the
// providers take them inline (5 MiB is Anthropic's largest picture), text
// as the tools' output is bounded.
const (
	MaxImageBytes = 5 << 20
	MaxPDFBytes   = 10 << 20
	maxTextBytes  = 50 << 10
	maxTextLines  = 2000
)

// DirectoryMime is the media type opencode gives a directory.
const DirectoryMime = "application/x-directory"

// File is a file part as a client sent it (opencode's FilePartInput).
type File struct {
	Mime     string
	URL      string
	Filename string
	Source   json.RawMessage
}

// Part is one part a file part becomes: a synthetic text part (Text), or
// the file part (File).
type Part struct {
	Text string
	File *File
}

// Env is what reading a prompt's files needs.
type Env struct {
	// Dir is the session's workspace.
	Dir string
	// Decide is the action the permission rules give a need of the read
	// and list tools: allow, ask or deny.
	Decide func(tool.Need) string
	// Model is the model that answers the prompt.
	Model llm.Model
}

// Error is an attachment that cannot be given to the model; the prompt is
// refused with its message.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errorf(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }

// Resolve returns the parts a file part becomes. An *Error refuses the
// prompt; another error is the server's (a cancelled request).
func Resolve(ctx context.Context, env Env, f File) ([]Part, error) {
	scheme, _, _ := strings.Cut(f.URL, ":")
	switch strings.ToLower(scheme) {
	case "data":
		return fromData(env, f)
	case "file":
		return fromFile(ctx, env, f)
	case "http", "https":
		if llm.ModalityOf(baseMime(f.Mime)) != llm.ModalityImage {
			return nil, errorf("url: a web address attaches a picture only; send other files as data: or file: URLs")
		}
		if err := takes(env.Model, llm.ModalityImage, f); err != nil {
			return nil, err
		}
		return []Part{{File: &f}}, nil
	}
	return nil, errorf("url: want a data:, file: or http(s): URL")
}

// fromData is an attachment whose content came with the prompt.
func fromData(env Env, f File) ([]Part, error) {
	if kind := llm.ModalityOf(baseMime(f.Mime)); kind != "" {
		if err := takes(env.Model, kind, f); err != nil {
			return nil, err
		}
		_, data, ok := llm.ParseDataURL(f.URL)
		if !ok {
			return nil, errorf("url: a %s comes as base64 data (data:%s;base64,…)", kind, baseMime(f.Mime))
		}
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil || len(raw) == 0 {
			return nil, errorf("url: the data of %s is not base64 (or is empty)", name(f))
		}
		return media(f, kind, raw)
	}
	if !Textual(f.Mime) {
		return nil, unsupported(f)
	}
	text, ok := DataText(f.URL)
	if !ok {
		return nil, errorf("url: %s is not UTF-8 text in a data: URL", name(f))
	}
	return []Part{{Text: called("Read", readInput{FilePath: f.Filename})}, {Text: bound(text)}, {File: &f}}, nil
}

// media is the file part of a picture or a PDF of the given bytes, its
// media type the one its bytes show (a client's guess from a file name
// can be wrong, and the providers refuse a picture that is not what its
// type says).
func media(f File, kind string, raw []byte) ([]Part, error) {
	sniffed := baseMime(http.DetectContentType(raw))
	if llm.ModalityOf(sniffed) != kind {
		return nil, errorf("%s is not %s: its bytes are %s", name(f), describe(kind), sniffed)
	}
	f.Mime = sniffed
	f.URL = "data:" + sniffed + ";base64," + base64.StdEncoding.EncodeToString(raw)
	return []Part{{File: &f}}, nil
}

// takes refuses an attachment of a kind the model does not take.
func takes(m llm.Model, kind string, f File) error {
	if m.Takes(kind) {
		return nil
	}
	return errorf("%s is %s, and the model %s does not take %s input (its modalities.input in the configuration); "+
		"choose a model that does", name(f), describe(kind), m.Name, kind)
}

func describe(kind string) string {
	if kind == llm.ModalityPDF {
		return "a PDF"
	}
	return "a picture (PNG, JPEG, GIF or WebP)"
}

func unsupported(f File) error {
	return errorf("%s (%s) cannot be given to the model: attach text, directories, pictures (PNG, JPEG, GIF, WebP) or PDFs",
		name(f), f.Mime)
}

func name(f File) string {
	if f.Filename != "" {
		return fmt.Sprintf("%q", f.Filename)
	}
	return "the attachment"
}

// readInput is the read tool's input, as the synthetic call shows it.
type readInput struct {
	FilePath string `json:"filePath"`
	Offset   int    `json:"offset,omitempty"`
	Limit    int    `json:"limit,omitempty"`
}

// called is opencode's line that introduces what a tool gave the model.
func called(tool string, input any) string {
	b, _ := json.Marshal(input)
	return fmt.Sprintf("Called the %s tool with the following input: %s", tool, b)
}

// baseMime is a media type without its parameters, in lower case.
func baseMime(m string) string {
	t, _, err := mime.ParseMediaType(m)
	if err != nil {
		t, _, _ = strings.Cut(strings.ToLower(m), ";")
		return strings.TrimSpace(t)
	}
	return t
}

// Textual reports whether a media type is text the model can read as
// such: text/*, and the JSON, XML, YAML and script types that are text.
func Textual(m string) bool {
	t := baseMime(m)
	if strings.HasPrefix(t, "text/") {
		return true
	}
	for _, s := range []string{"json", "xml", "yaml", "javascript", "typescript", "x-sh", "toml", "sql"} {
		if strings.HasPrefix(t, "application/") && strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// DataText decodes a data: URL that holds UTF-8 text.
func DataText(u string) (string, bool) {
	rest, _ := strings.CutPrefix(u, "data:")
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", false
	}
	var b []byte
	if strings.HasSuffix(meta, ";base64") {
		d, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return "", false
		}
		b = d
	} else {
		s, err := url.PathUnescape(data)
		if err != nil {
			return "", false
		}
		b = []byte(s)
	}
	if !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// bound cuts text to what one tool's output may put into the
// conversation, saying so.
func bound(text string) string {
	cut, lines, shown, ok := textcut.Head(text, maxTextLines, maxTextBytes)
	if !ok {
		return text
	}
	return cut + fmt.Sprintf("\n\n[cut: the first %d of %d lines shown (%d of %d bytes); read the rest with the read tool]",
		shown, lines, len(cut), len(text))
}

// allowed is the action the rules give the needs: deny when one is
// denied, ask when one asks, else allow; what names the first that did
// not allow.
func allowed(env Env, needs []tool.Need) (action, what string, external bool) {
	action = core.ActionAllow
	for _, n := range needs {
		switch env.Decide(n) {
		case core.ActionDeny:
			return core.ActionDeny, n.Permission + " " + strings.Join(n.Patterns, ", "), false
		case core.ActionAsk:
			if action == core.ActionAllow {
				action, what = core.ActionAsk, n.Permission+" "+strings.Join(n.Patterns, ", ")
			}
		}
		if n.Permission == "external_directory" {
			external = true
		}
	}
	return action, what, external
}
