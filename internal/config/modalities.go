package config

import (
	"slices"

	"github.com/agentd/agentd/internal/llm"
)

// Modalities are the kinds of input and output a model has (opencode's).
type Modalities struct {
	Input  []string `json:"input"`
	Output []string `json:"output"`
}

// modalityNames are the kinds opencode's schema knows.
var modalityNames = map[string]bool{"text": true, "audio": true, "image": true, "video": true, "pdf": true}

// input is what the configuration says the model takes, nil when silent.
func (m Model) input() *llm.Modalities {
	switch {
	case m.Modalities != nil && m.Modalities.Input != nil:
		return &llm.Modalities{Image: slices.Contains(m.Modalities.Input, llm.ModalityImage),
			PDF: slices.Contains(m.Modalities.Input, llm.ModalityPDF)}
	case m.Attachment != nil:
		return &llm.Modalities{Image: *m.Attachment, PDF: *m.Attachment}
	}
	return nil
}

// Input is what the model takes besides text: what the configuration
// says, else what agentd knows of the model by its name (id, or the
// model's own id when it sets one).
func (m Model) Input(id string) llm.Modalities {
	if in := m.input(); in != nil {
		return *in
	}
	if m.ID != "" {
		id = m.ID
	}
	in, _ := llm.KnownInput(id)
	return in
}
