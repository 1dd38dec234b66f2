package fakellm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/llm"
)

// Pictures and documents, as the two APIs take them. The fake checks them
// as the real ones do (a picture's data must be base64 of a format they
// take; a document must be a PDF) and records them as image and document
// contents, so that tests see what a provider would have received.

// mediaSource is the source of an Anthropic image or document block.
type mediaSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// oaPart is one part of an OpenAI message's content list.
type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	File *struct {
		FileData string `json:"file_data"`
		Filename string `json:"filename"`
	} `json:"file"`
}

// oaUserContent reads an OpenAI user message's content: a string, or a
// list of text, image_url and file parts.
func oaUserContent(raw json.RawMessage) ([]llm.Content, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []llm.Content{{Type: llm.ContentText, Text: s}}, nil
	}
	var parts []oaPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	var out []llm.Content
	for i, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, llm.Content{Type: llm.ContentText, Text: p.Text})
		case "image_url":
			if p.ImageURL == nil {
				return nil, fmt.Errorf("content[%d].image_url is required", i)
			}
			c, err := dataContent(llm.ContentImage, p.ImageURL.URL, "")
			if err != nil {
				return nil, fmt.Errorf("content[%d].image_url: %v", i, err)
			}
			out = append(out, c)
		case "file":
			if p.File == nil || p.File.FileData == "" {
				return nil, fmt.Errorf("content[%d].file.file_data is required", i)
			}
			c, err := dataContent(llm.ContentDocument, p.File.FileData, p.File.Filename)
			if err != nil {
				return nil, fmt.Errorf("content[%d].file.file_data: %v", i, err)
			}
			out = append(out, c)
		default:
			return nil, fmt.Errorf("content[%d].type: unsupported content part type %q", i, p.Type)
		}
	}
	return out, nil
}

// dataContent reads a data: URL (or, for an image, a web address) as an
// image or document content.
func dataContent(typ, url, filename string) (llm.Content, error) {
	if typ == llm.ContentImage && (strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://")) {
		return llm.Content{Type: typ, URL: url}, nil
	}
	mediaType, data, ok := llm.ParseDataURL(url)
	if !ok {
		return llm.Content{}, fmt.Errorf("want a base64 data: URL")
	}
	return checkMedia(llm.Content{Type: typ, MediaType: mediaType, Data: data, Filename: filename})
}

// anMedia reads an Anthropic image or document block.
func anMedia(b anBlock) (llm.Content, error) {
	typ := llm.ContentImage
	if b.Type == "document" {
		typ = llm.ContentDocument
	}
	if b.Source == nil {
		return llm.Content{}, fmt.Errorf("%s.source: Field required", b.Type)
	}
	switch b.Source.Type {
	case "url":
		if typ != llm.ContentImage {
			return llm.Content{}, fmt.Errorf("document.source.type: the fake takes base64 documents only")
		}
		return llm.Content{Type: typ, URL: b.Source.URL}, nil
	case "base64":
		return checkMedia(llm.Content{Type: typ, MediaType: b.Source.MediaType, Data: b.Source.Data, Filename: b.Title})
	}
	return llm.Content{}, fmt.Errorf("%s.source.type: unsupported source type %q", b.Type, b.Source.Type)
}

// checkMedia refuses what the real APIs refuse: data that is not base64,
// a picture of a format they do not take, a document that is not a PDF.
func checkMedia(c llm.Content) (llm.Content, error) {
	raw, err := base64.StdEncoding.DecodeString(c.Data)
	if err != nil || len(raw) == 0 {
		return c, fmt.Errorf("invalid base64 data")
	}
	want := llm.ModalityImage
	if c.Type == llm.ContentDocument {
		want = llm.ModalityPDF
	}
	if llm.ModalityOf(c.MediaType) != want {
		return c, fmt.Errorf("media type %q is not a supported %s type", c.MediaType, want)
	}
	return c, nil
}
