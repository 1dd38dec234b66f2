package llm

import (
	"reflect"
	"strings"
	"testing"
)

func TestMedia(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mime, url string
		want      Content
		ok        bool
	}{
		{"image/png", "data:image/png;base64,iVBO", Content{Type: ContentImage, MediaType: "image/png", Data: "iVBO", Filename: "f"}, true},
		{"IMAGE/JPEG", "https://x/y.jpg", Content{Type: ContentImage, MediaType: "image/jpeg", URL: "https://x/y.jpg", Filename: "f"}, true},
		{"application/pdf", "data:application/pdf;base64,JVBE", Content{Type: ContentDocument, MediaType: "application/pdf", Data: "JVBE", Filename: "f"}, true},
		{"application/pdf", "https://x/y.pdf", Content{}, false},
		{"image/png", "file:///tmp/x.png", Content{}, false},
		{"image/png", "data:image/png,raw", Content{}, false},
		{"image/bmp", "data:image/bmp;base64,Qk0=", Content{}, false},
		{"text/plain", "data:text/plain;base64,aGk=", Content{}, false},
	} {
		got, ok := Media(c.mime, c.url, "f")
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Media(%s, %s) = %+v, %v; want %+v, %v", c.mime, c.url, got, ok, c.want, c.ok)
		}
	}
}

// FitInput replaces what the model does not take with opencode's note,
// without touching the conversation it was given (the engine keeps it).
func TestFitInput(t *testing.T) {
	t.Parallel()
	msgs := []Message{
		{Role: RoleUser, Content: []Content{{Type: ContentText, Text: "see"},
			{Type: ContentImage, MediaType: "image/png", Data: "iVBO", Filename: "shot.png"},
			{Type: ContentDocument, MediaType: "application/pdf", Data: "JVBE"}}},
		{Role: RoleAssistant, Content: []Content{{Type: ContentText, Text: "seen"}}},
	}
	if got := FitInput(msgs, Model{Input: &Modalities{Image: true, PDF: true}}); &got[0] != &msgs[0] {
		t.Error("a conversation that fits was copied")
	}
	got := FitInput(msgs, Model{Input: &Modalities{PDF: true}})
	if msgs[0].Content[1].Type != ContentImage {
		t.Fatal("FitInput changed its argument")
	}
	c := got[0].Content
	if c[1].Type != ContentText || c[1].Text != `ERROR: Cannot read "shot.png" (this model does not support image input). Inform the user.` ||
		c[2].Type != ContentDocument || got[1].Content[0].Text != "seen" {
		t.Errorf("fitted = %+v", got)
	}
	got = FitInput(msgs, Model{})
	if !strings.Contains(got[0].Content[2].Text, "Cannot read pdf (this model does not support pdf input)") {
		t.Errorf("text only = %+v", got[0].Content)
	}
}

// A picture weighs what its tokens do, not what its base64 does: a
// conversation with a large picture is not compacted for its size.
func TestContentSize(t *testing.T) {
	t.Parallel()
	big := Content{Type: ContentImage, MediaType: "image/png", Data: strings.Repeat("A", 4<<20)}
	if n := big.Size(); n != imageSize {
		t.Errorf("a picture weighs %d, want %d", n, imageSize)
	}
	if n := (Content{Type: ContentText, Text: "abcd", CallID: "c"}).Size(); n != 5 {
		t.Errorf("text weighs %d", n)
	}
}
