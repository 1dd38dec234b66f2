package engine

import (
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/attach"
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
)

// fileContent is what the model reads of the file part parts[i] of a user
// message. A picture or a PDF is itself an image or a document. What a
// text file or a directory holds is in the synthetic text parts written
// before it when the prompt was admitted (package attach), so its part
// adds nothing; a message written before agentd read attachments has no
// such parts: a text file it sent as data is given whole, another file is
// named (never its data).
func fileContent(parts []core.Part, i int) (llm.Content, bool) {
	p := parts[i]
	if c, ok := llm.Media(p.Mime, p.URL, p.Filename); ok {
		return c, true
	}
	for _, q := range parts {
		if q.Type == core.PartText && q.Synthetic {
			return llm.Content{}, false
		}
	}
	return llm.Content{Type: llm.ContentText, Text: legacyAttachment(p)}, true
}

// legacyAttachment is how a file part of an old message reads.
func legacyAttachment(p core.Part) string {
	if !strings.HasPrefix(p.URL, "data:") {
		return fmt.Sprintf("[attached file %s (%s): %s]", p.Filename, p.Mime, p.URL)
	}
	if text, ok := attach.DataText(p.URL); ok && attach.Textual(p.Mime) {
		return fmt.Sprintf("<file name=%q mime=%q>\n%s\n</file>", p.Filename, p.Mime, text)
	}
	return fmt.Sprintf("[attached file %s (%s)]", p.Filename, p.Mime)
}
