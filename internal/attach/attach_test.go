package attach_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/attach"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/permission"
	"github.com/agentd/agentd/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pngBytes is a small real PNG.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var (
	vision   = llm.Model{Name: "eyes", Input: &llm.Modalities{Image: true, PDF: true}}
	textOnly = llm.Model{Name: "plain", Input: &llm.Modalities{}}
)

// env reads in dir under the default rules plus extra.
func env(dir string, m llm.Model, extra ...core.Rule) attach.Env {
	rules := append(permission.Defaults(), extra...)
	return attach.Env{Dir: dir, Model: m, Decide: func(n tool.Need) string { return n.Decide(rules, nil, nil) }}
}

func fileURL(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }

// texts are the synthetic texts of parts, and file the file part (nil
// when there is none).
func split(parts []attach.Part) (texts []string, file *attach.File) {
	for _, p := range parts {
		if p.File != nil {
			file = p.File
		} else {
			texts = append(texts, p.Text)
		}
	}
	return texts, file
}

func resolve(t *testing.T, e attach.Env, f attach.File) ([]string, *attach.File) {
	t.Helper()
	parts, err := attach.Resolve(t.Context(), e, f)
	if err != nil {
		t.Fatalf("resolve %s: %v", f.URL, err)
	}
	return split(parts)
}

func refused(t *testing.T, e attach.Env, f attach.File, want string) {
	t.Helper()
	_, err := attach.Resolve(t.Context(), e, f)
	var ae *attach.Error
	if !errors.As(err, &ae) || !strings.Contains(ae.Msg, want) {
		t.Fatalf("resolve %.60s: err = %v, want an attach error saying %q", f.URL, err, want)
	}
}

// Text sent as data, a file and a line range of it read from the
// workspace, and a directory's listing reach the model as synthetic text,
// before the file part, which stays as sent.
func TestTextFilesAndDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := "one\ntwo\nthree\nfour\n"
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := env(dir, textOnly)

	data := attach.File{Mime: "text/plain", Filename: "a.md", URL: "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("# Title\nbody"))}
	texts, file := resolve(t, e, data)
	if len(texts) != 2 || texts[0] != `Called the Read tool with the following input: {"filePath":"a.md"}` || texts[1] != "# Title\nbody" {
		t.Errorf("data text = %q", texts)
	}
	if file == nil || file.URL != data.URL {
		t.Errorf("file part = %+v, want it as sent", file)
	}

	path := filepath.Join(dir, "notes.txt")
	texts, file = resolve(t, e, attach.File{Mime: "text/plain", Filename: "notes.txt", URL: fileURL(path)})
	if len(texts) != 2 || !strings.Contains(texts[0], `"filePath":"`+path+`"`) || !strings.Contains(texts[1], "three") {
		t.Errorf("file text = %q", texts)
	}
	if file == nil || file.Mime != "text/plain" {
		t.Errorf("file part = %+v", file)
	}

	texts, _ = resolve(t, e, attach.File{Mime: "text/plain", Filename: "notes.txt#2-3", URL: fileURL(path) + "?start=2&end=3"})
	if len(texts) != 2 || !strings.Contains(texts[0], `"offset":1,"limit":2`) || !strings.Contains(texts[1], "two") ||
		!strings.Contains(texts[1], "three") || strings.Contains(texts[1], "one") || strings.Contains(texts[1], "four") {
		t.Errorf("line range = %q", texts)
	}

	texts, file = resolve(t, e, attach.File{Mime: "text/plain", Filename: "src", URL: fileURL(filepath.Join(dir, "src"))})
	if len(texts) != 2 || !strings.HasPrefix(texts[0], "Called the List tool") || !strings.Contains(texts[1], "main.go") ||
		!strings.Contains(texts[1], "pkg") {
		t.Errorf("directory = %q", texts)
	}
	if file == nil || file.Mime != attach.DirectoryMime {
		t.Errorf("directory part = %+v", file)
	}

	// A file that is not there: opencode's account of the failure, and no
	// file part.
	texts, file = resolve(t, e, attach.File{Mime: "text/plain", Filename: "gone", URL: fileURL(filepath.Join(dir, "gone.txt"))})
	if len(texts) != 2 || !strings.Contains(texts[1], "Read tool failed to read") || file != nil {
		t.Errorf("missing file = %q, %+v", texts, file)
	}
}

// Text beyond what one tool's output may hold is cut, and says so.
func TestLongTextIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789abcdef\n", 10000)
	texts, _ := resolve(t, env(t.TempDir(), textOnly), attach.File{Mime: "text/plain", Filename: "big.txt",
		URL: "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(long))})
	if len(texts) != 2 || len(texts[1]) > 60<<10 || !strings.Contains(texts[1], "[cut: the first 2000 of 10001 lines") {
		t.Errorf("bounded text: %d bytes, ends %q", len(texts[1]), texts[1][max(0, len(texts[1])-120):])
	}
}

// A picture reaches a model that takes pictures as the file part itself,
// its type the one its bytes show; a model without image input refuses
// it, as it refuses what is not a picture at all.
func TestPictures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	img := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(img)
	sent := attach.File{Mime: "image/jpeg", Filename: "shot.png", URL: "data:image/jpeg;base64," + b64}
	texts, file := resolve(t, env(dir, vision), sent)
	if len(texts) != 0 || file == nil || file.Mime != "image/png" || file.URL != "data:image/png;base64,"+b64 {
		t.Errorf("picture = %q, %+v", texts, file)
	}
	refused(t, env(dir, textOnly), sent, `the model plain does not take image input`)
	refused(t, env(dir, vision), attach.File{Mime: "image/png", Filename: "x.png",
		URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("not a picture at all"))}, "is not a picture")
	refused(t, env(dir, vision), attach.File{Mime: "application/zip", Filename: "x.zip", URL: "data:application/zip;base64,UEsDBA=="},
		"cannot be given to the model")

	// A picture in the workspace, named by its file URL (the TUI's @,
	// opencode run --file), is read into the part.
	path := filepath.Join(dir, "shot.png")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	texts, file = resolve(t, env(dir, vision), attach.File{Mime: "text/plain", Filename: "shot.png", URL: fileURL(path)})
	if len(texts) != 1 || file == nil || file.Mime != "image/png" || file.URL != "data:image/png;base64,"+b64 {
		t.Errorf("picture from the workspace = %q, %+v", texts, file)
	}
	refused(t, env(dir, textOnly), attach.File{Mime: "text/plain", Filename: "shot.png", URL: fileURL(path)}, "does not take image input")

	web := attach.File{Mime: "image/png", Filename: "w.png", URL: "https://example.com/w.png"}
	if _, file := resolve(t, env(dir, vision), web); file == nil || file.URL != web.URL {
		t.Errorf("web picture = %+v", file)
	}
	refused(t, env(dir, vision), attach.File{Mime: "text/plain", URL: "https://example.com/a.txt"}, "web address attaches a picture only")
}

// What the rules deny refuses the prompt; what they ask for is not read
// here (the model is told, and reads it with its tools, which ask); a
// file outside the workspace asks by default.
func TestRules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("hunter2"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := attach.File{Mime: "text/plain", Filename: "secret.txt", URL: fileURL(secret)}
	refused(t, env(dir, textOnly, core.Rule{Permission: "read", Pattern: "secret.txt", Action: core.ActionDeny}), f,
		"denied by the permission rules (read secret.txt)")

	texts, file := resolve(t, env(dir, textOnly, core.Rule{Permission: "read", Pattern: "secret.txt", Action: core.ActionAsk}), f)
	if len(texts) != 1 || strings.Contains(texts[0], "hunter2") || !strings.Contains(texts[0], "needs the user's permission (read secret.txt)") || file == nil {
		t.Errorf("asked = %q, %+v", texts, file)
	}

	outside := filepath.Join(t.TempDir(), "elsewhere.txt")
	if err := os.WriteFile(outside, []byte("far away"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := attach.File{Mime: "text/plain", Filename: "elsewhere.txt", URL: fileURL(outside)}
	texts, _ = resolve(t, env(dir, textOnly), o)
	if len(texts) != 1 || strings.Contains(texts[0], "far away") || !strings.Contains(texts[0], "external_directory") {
		t.Errorf("outside, asked = %q", texts)
	}
	refused(t, env(dir, textOnly, core.Rule{Permission: "external_directory", Pattern: "*", Action: core.ActionDeny}), o,
		"denied by the permission rules (external_directory")
	texts, _ = resolve(t, env(dir, textOnly, core.Rule{Permission: "external_directory", Pattern: "*", Action: core.ActionAllow}), o)
	if len(texts) != 2 || !strings.Contains(texts[1], "far away") {
		t.Errorf("outside, allowed = %q", texts)
	}

	// A symlink in the workspace that leads out is judged where it leads.
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	refused(t, env(dir, textOnly, core.Rule{Permission: "external_directory", Pattern: "*", Action: core.ActionDeny}),
		attach.File{Mime: "text/plain", URL: fileURL(link)}, "denied by the permission rules (external_directory")
}
