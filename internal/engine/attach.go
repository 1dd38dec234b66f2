package engine

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/core"
)

// attachment is what the model reads of a file attached to a prompt. A
// text file sent as a data: URL (agentd run --file) is given whole, as the
// user sent it; other files are named by their URL, which the model may
// read with its tools.
func attachment(p core.Part) string {
	if text, ok := dataText(p.URL); ok {
		return fmt.Sprintf("<file name=%q mime=%q>\n%s\n</file>", p.Filename, p.Mime, text)
	}
	return fmt.Sprintf("[attached file %s (%s): %s]", p.Filename, p.Mime, p.URL)
}

// dataText decodes a data: URL that holds text.
func dataText(u string) (string, bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return "", false
	}
	mediaType, _, _ := strings.Cut(meta, ";")
	if mediaType != "" && !strings.HasPrefix(mediaType, "text/") && !strings.Contains(mediaType, "json") && !strings.Contains(mediaType, "xml") {
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
