package llm

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// Pictures and documents. A user's attachment reaches the model as what it
// is — an image block, a PDF document — on the providers whose model takes
// it: the engine refuses a prompt whose attachments the model does not
// take, and FitInput replaces those of earlier turns with a note when the
// session has moved to a model that takes text only.

// Modalities are the kinds of input a model takes besides text (opencode's
// modalities.input: "image", "pdf"; agentd sends no audio or video).
type Modalities struct {
	Image bool
	PDF   bool
}

// Input kinds, as opencode's modalities name them.
const (
	ModalityImage = "image"
	ModalityPDF   = "pdf"
)

// InputTaker is implemented by providers that know what their models take
// when the configuration does not say (the scripted model takes it all).
type InputTaker interface {
	Input(model string) Modalities
}

// knownInput is what the common models of the two native providers take,
// by the prefix of their names (as knownPrices): pictures, and PDFs as
// documents (Anthropic) or files (OpenAI's chat completions).
var knownInput = []string{"gpt-4o", "gpt-4.1", "gpt-5", "o3", "o4-mini",
	"claude-opus-4", "claude-sonnet-4", "claude-haiku-4-5", "claude-3-7-sonnet", "claude-3-5-sonnet"}

// KnownInput is what agentd knows a model takes by its name (its table of
// common models); ok is false for a model it does not know.
func KnownInput(model string) (in Modalities, ok bool) {
	for _, prefix := range knownInput {
		if strings.HasPrefix(model, prefix) {
			return Modalities{Image: true, PDF: true}, true
		}
	}
	return Modalities{}, false
}

// inputOf is what a model the configuration says nothing about takes: the
// table's answer for known models, else the provider's, else text only.
func inputOf(p Provider, model string) *Modalities {
	if in, ok := KnownInput(model); ok {
		return &in
	}
	if t, ok := p.(InputTaker); ok {
		in := t.Input(model)
		return &in
	}
	return &Modalities{}
}

// Takes reports whether the model takes input of the modality.
func (m Model) Takes(modality string) bool {
	switch modality {
	case "text":
		return true
	case ModalityImage:
		return m.Input != nil && m.Input.Image
	case ModalityPDF:
		return m.Input != nil && m.Input.PDF
	}
	return false
}

// ModalityOf names the input kind of a media type: image for the picture
// formats both providers take (PNG, JPEG, GIF, WebP), pdf for PDF, "" for
// anything else.
func ModalityOf(mediaType string) string {
	switch strings.ToLower(mediaType) {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return ModalityImage
	case "application/pdf":
		return ModalityPDF
	}
	return ""
}

// ParseDataURL splits a base64 data: URL into its media type and its data
// (still base64); ok is false for anything else.
func ParseDataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", false
	}
	meta, ok = strings.CutSuffix(meta, ";base64")
	if !ok {
		return "", "", false
	}
	mediaType, _, _ = strings.Cut(meta, ";")
	return strings.ToLower(mediaType), data, true
}

// Media is the content a model looks at for an attachment of the given
// media type: an image or a PDF document from a base64 data: URL, or an
// image on the web (http or https). ok is false for any other attachment.
func Media(mediaType, url, filename string) (Content, bool) {
	kind := ModalityOf(mediaType)
	if kind == "" {
		return Content{}, false
	}
	typ := ContentImage
	if kind == ModalityPDF {
		typ = ContentDocument
	}
	c := Content{Type: typ, MediaType: strings.ToLower(mediaType), Filename: filename}
	if _, data, ok := ParseDataURL(url); ok {
		c.Data = data
		return c, true
	}
	if kind == ModalityImage && (strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://")) {
		c.URL = url
		return c, true
	}
	return Content{}, false
}

// CheckMedia reports why an attachment's URL cannot reach a model as an
// image or a document: data that is not base64, or that is empty.
func CheckMedia(url string) error {
	_, data, ok := ParseDataURL(url)
	if !ok {
		return nil
	}
	if data == "" {
		return fmt.Errorf("the data: URL is empty")
	}
	if _, err := base64.StdEncoding.DecodeString(data); err != nil {
		return fmt.Errorf("the data: URL is not valid base64: %v", err)
	}
	return nil
}

// modalityOfContent is the input kind of an image or document content ("":
// another content).
func modalityOfContent(c Content) string {
	switch c.Type {
	case ContentImage:
		return ModalityImage
	case ContentDocument:
		return ModalityPDF
	}
	return ""
}

// Unsupported is what the model reads instead of an attachment it does not
// take (opencode's words, so that it tells the user).
func Unsupported(c Content) string {
	kind := modalityOfContent(c)
	name := kind
	if c.Filename != "" {
		name = strconv.Quote(c.Filename)
	}
	return fmt.Sprintf("ERROR: Cannot read %s (this model does not support %s input). Inform the user.", name, kind)
}

// FitInput returns msgs with the images and documents the model does not
// take replaced by a note saying so. msgs itself is not changed (the
// engine keeps converted histories); it is returned as is when everything
// fits, which is every time for a conversation without attachments.
func FitInput(msgs []Message, m Model) []Message {
	var out []Message
	for i, msg := range msgs {
		var content []Content
		for j, c := range msg.Content {
			kind := modalityOfContent(c)
			if kind == "" || m.Takes(kind) {
				continue
			}
			if content == nil {
				content = append([]Content(nil), msg.Content...)
			}
			content[j] = Content{Type: ContentText, Text: Unsupported(c)}
		}
		if content == nil {
			continue
		}
		if out == nil {
			out = append([]Message(nil), msgs...)
		}
		out[i] = Message{Role: msg.Role, Content: content}
	}
	if out == nil {
		return msgs
	}
	return out
}

// imageSize is what one picture weighs in a request, in bytes of text of
// the same number of tokens: about 1,600 tokens, a picture at the largest
// size the providers take before they scale it down.
const imageSize = 6400

// Size estimates what a content weighs in a request, in bytes of text of
// as many tokens: its text and call, a fixed weight for a picture, and for
// a document its decoded bytes (a PDF's pages cost text and pictures both).
func (c Content) Size() int {
	n := len(c.Text) + len(c.Input) + len(c.Name) + len(c.CallID)
	switch c.Type {
	case ContentImage:
		n += imageSize
	case ContentDocument:
		n += len(c.Data) * 3 / 4
	}
	return n
}
