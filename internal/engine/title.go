package engine

import "github.com/agentd/agentd/internal/core"

// titleLater has the session's title written (package title) from the
// text parts of the prompt being admitted.
func (e *Engine) titleLater(sessionID string, model core.ModelRef, parts []InputPart) {
	var texts []string
	for _, p := range parts {
		if p.Type == core.PartText {
			texts = append(texts, p.Text)
		}
	}
	e.titles.Later(sessionID, model, texts)
}
