package opencode_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// TestRunAttachFiles: opencode run --attach --file sends a picture as
// data, which the model gets as a picture (the scripted model takes
// pictures and says what it got), and a text file, whose text the model
// reads.
func TestRunAttachFiles(t *testing.T) {
	n := startNode(t, "")
	img := image.NewRGBA(image.Rect(0, 0, 5, 5))
	img.Set(2, 2, color.RGBA{B: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "shot.png"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := n.opencode(t, "attachments:", "--file", "shot.png")
	if want := "image image/png " + strconv.Itoa(b.Len()) + " bytes"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("the model did not get the picture (want %q): exit %d, stdout %q", want, r.code, r.stdout)
	}
	n.rec.mu.Lock()
	from := len(n.rec.exchanges)
	n.rec.mu.Unlock()
	r = n.opencode(t, "what does it say", "--file", "hello.txt")
	if r.code != 0 || !strings.Contains(r.stdout, "hello from the workspace") {
		n.rec.mu.Lock()
		for _, ex := range n.rec.exchanges[from:] {
			t.Logf("%s %s → %d %.300s", ex.method, ex.path, ex.status, ex.body)
		}
		n.rec.mu.Unlock()
		t.Fatalf("the model did not read the file: exit %d, stdout %q", r.code, r.stdout)
	}
	n.rec.check(t)
}

// TestTUIAtFile: @file in opencode's TUI sends the file's URL; the model
// reads the file's text (the scripted model echoes what it read), and the
// transcript keeps the file part as the TUI sent it.
func TestTUIAtFile(t *testing.T) {
	n := startNode(t, "")
	u := startTUI(t, n)
	u.waitFor("its prompt", "Ask anything")
	u.typeText("echo @hel")
	u.waitFor("the file completion", "hello.txt")
	u.keys("Enter")
	u.typeText("please")
	u.keys("Enter")
	u.waitFor("the file's text in the answer", "hello from the workspace")

	s := n.sessions(t)[0]
	var file *core.Part
	for _, m := range n.transcript(t, s.ID) {
		for i, p := range m.Parts {
			if p.Type == core.PartFile {
				file = &m.Parts[i]
			}
		}
	}
	if file == nil || !strings.HasPrefix(file.URL, "file://") || !strings.HasSuffix(file.URL, "hello.txt") || len(file.Source) == 0 {
		t.Errorf("the stored file part = %+v, want the TUI's, with its source", file)
	}
	n.rec.check(t)
}
