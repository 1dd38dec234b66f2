package app_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/fakellm"
	"github.com/agentd/agentd/internal/llm"
)

// attachNode starts agentd on fakellm (recording what it receives) over
// the wire of npm, with a model that takes pictures and PDFs ("eyes") and
// one that takes text only ("plain"); reading secret.txt is denied.
func attachNode(t *testing.T, npm string) (*node, *fakellm.Server) {
	t.Helper()
	fake := fakellm.New(fakellm.Options{Second: 50 * time.Millisecond, Record: true})
	hs := httptest.NewServer(fake.Handler())
	t.Cleanup(hs.Close)
	f, err := config.Parse([]byte(`{
	  "model": "fake/eyes",
	  "provider": {"fake": {"npm": "` + npm + `", "options": {"baseURL": "` + hs.URL + `/v1", "apiKey": "k"},
	    "models": {
	      "eyes": {"modalities": {"input": ["text", "image", "pdf"], "output": ["text"]}},
	      "plain": {"name": "Plain"}
	    }}}}`))
	if err != nil {
		t.Fatal(err)
	}
	models, def, err := f.Build()
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, func(c *app.Config) {
		c.Models = models
		c.Engine.DefaultModel = def
		c.Engine.Permission = append(c.Engine.Permission, core.Rule{Permission: "read", Pattern: "secret.txt", Action: core.ActionDeny})
	})
	return n, fake
}

func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(2, 3, color.RGBA{G: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lastPrompt is the last user message of the last request fakellm got.
func lastPrompt(t *testing.T, fake *fakellm.Server) []llm.Content {
	t.Helper()
	rec := fake.Recorded()
	for i := len(rec) - 1; i >= 0; i-- {
		if rec[i].Request.Purpose != "" {
			continue // a title
		}
		msgs := rec[i].Request.Messages
		for j := len(msgs) - 1; j >= 0; j-- {
			if msgs[j].Role == llm.RoleUser {
				return msgs[j].Content
			}
		}
	}
	t.Fatal("fakellm received no prompt")
	return nil
}

// Pictures and PDFs reach the model as image and document content on
// both wires, not as text; a model that takes text only refuses them with
// a clear error before any call.
func TestAttachedPicturesReachTheModel(t *testing.T) {
	t.Parallel()
	for _, npm := range providerKinds {
		t.Run(npm, func(t *testing.T) {
			t.Parallel()
			n, fake := attachNode(t, npm)
			ctx := t.Context()
			img := testPNG(t)
			b64 := base64.StdEncoding.EncodeToString(img)
			pdf := base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"))
			sid := n.session()
			m, err := n.c.Send(ctx, sid, client.Prompt{Text: "what is this?\nattachments:", Files: []client.FilePart{
				{Mime: "image/png", Filename: "shot.png", URL: "data:image/png;base64," + b64,
					Source: json.RawMessage(`{"type":"file","path":"shot.png","text":{"value":"[Image 1]","start":0,"end":9}}`)},
				{Mime: "application/pdf", Filename: "spec.pdf", URL: "data:application/pdf;base64," + pdf}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(m); !strings.Contains(got, "image image/png "+strconv.Itoa(len(img))+" bytes") || !strings.Contains(got, "document application/pdf") {
				t.Errorf("the model saw %q", got)
			}
			var image, doc *llm.Content
			for _, c := range lastPrompt(t, fake) {
				switch c.Type {
				case llm.ContentImage:
					image = &c
				case llm.ContentDocument:
					doc = &c
				case llm.ContentText:
					if strings.Contains(c.Text, b64[:40]) {
						t.Errorf("the picture went as text: %.80q", c.Text)
					}
				}
			}
			if image == nil || image.MediaType != "image/png" || image.Data != b64 {
				t.Errorf("image content = %+v", image)
			}
			if doc == nil || doc.MediaType != "application/pdf" || doc.Data != pdf || doc.Filename != "spec.pdf" {
				t.Errorf("document content = %+v", doc)
			}
			// The transcript keeps opencode's file parts, source and all.
			msgs, err := n.c.Messages(ctx, sid)
			if err != nil {
				t.Fatal(err)
			}
			f := partOf(msgs[0], core.PartFile)
			if f == nil || f.Mime != "image/png" || f.Filename != "shot.png" || !strings.Contains(string(f.Source), `"[Image 1]"`) {
				t.Errorf("stored file part = %+v", f)
			}

			before := fake.Requests()
			_, err = n.c.Send(ctx, n.session(), client.Prompt{Text: "and this?", Model: &client.ModelRef{ProviderID: "fake", ModelID: "plain"},
				Files: []client.FilePart{{Mime: "image/png", Filename: "shot.png", URL: "data:image/png;base64," + b64}}})
			var ce *client.Error
			if !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest || !strings.Contains(ce.Message, "does not take image input") {
				t.Errorf("a picture for a text-only model: err = %v, want 400 saying so", err)
			}
			if fake.Requests() != before {
				t.Error("the provider was called for a refused prompt")
			}

			// The session moves to the text-only model: the earlier turn's
			// picture becomes a note the model reads (opencode's), and the
			// conversation goes on.
			if _, err := n.c.Send(ctx, sid, client.Prompt{Text: "reply:go on", Model: &client.ModelRef{ProviderID: "fake", ModelID: "plain"}}); err != nil {
				t.Fatal(err)
			}
			rec := fake.Recorded()
			first := rec[len(rec)-1].Request.Messages[0]
			var note string
			for _, c := range first.Content {
				if c.Type == llm.ContentImage || c.Type == llm.ContentDocument {
					t.Errorf("a text-only model was sent %s content", c.Type)
				}
				note += c.Text + "\n"
			}
			if !strings.Contains(note, "does not support image input") || !strings.Contains(note, `"spec.pdf" (this model does not support pdf input)`) {
				t.Errorf("notes for the earlier attachments = %q", note)
			}
		})
	}
}

// Files named by file:// URLs (the TUI's @file) reach the model as the
// read and list tools show them, through the permission rules: a denied
// file refuses the prompt and is never sent.
func TestAttachedWorkspaceFiles(t *testing.T) {
	t.Parallel()
	n, fake := attachNode(t, "@ai-sdk/openai-compatible")
	ctx := t.Context()
	dir := t.TempDir()
	for name, body := range map[string]string{"notes.txt": "alpha\nbeta\ngamma\n", "lib/util.go": "package lib\n", "secret.txt": "hunter2\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := n.c.CreateSession(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	file := func(p, mime string) client.FilePart {
		return client.FilePart{Mime: mime, Filename: p, URL: (&url.URL{Scheme: "file", Path: filepath.Join(dir, p)}).String()}
	}
	if _, err := n.c.Send(ctx, s.ID, client.Prompt{Text: "reply:read them",
		Files: []client.FilePart{file("notes.txt", "text/plain"), file("lib", "application/x-directory")}}); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, c := range lastPrompt(t, fake) {
		got.WriteString(c.Text + "\n")
	}
	for _, want := range []string{`Called the Read tool with the following input: {"filePath":"` + filepath.Join(dir, "notes.txt"),
		"gamma", "Called the List tool", "util.go"} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("the model's prompt lacks %q:\n%s", want, got.String())
		}
	}
	if strings.Contains(got.String(), "file://") {
		t.Errorf("the model got a file URL instead of the file:\n%s", got.String())
	}

	before := fake.Requests()
	_, err = n.c.Send(ctx, s.ID, client.Prompt{Text: "reply:and this", Files: []client.FilePart{file("secret.txt", "text/plain")}})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != http.StatusBadRequest || !strings.Contains(ce.Message, "denied by the permission rules") {
		t.Errorf("a denied file: err = %v, want 400 saying so", err)
	}
	if fake.Requests() != before {
		t.Error("the provider was called for a refused prompt")
	}
	for _, r := range fake.Recorded() {
		if bytes.Contains(r.Body, []byte("hunter2")) {
			t.Fatal("the denied file reached the provider")
		}
	}
}
