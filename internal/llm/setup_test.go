package llm

import (
	"testing"

	"github.com/agentd/agentd/internal/core"
)

// TestAddModels: models a plugin's provider hook adds resolve by their id
// to the provider-side name, beside a provider's own (which win), and a
// provider that took any model id still does.
func TestAddModels(t *testing.T) {
	r := NewRegistry()
	r.Add("open", nil, nil)
	r.Add("closed", nil, map[string]Model{"own": {Name: "own-name"}})
	add := map[string]Model{"extra": {Name: "api-id"}, "own": {Name: "hook-name"}}
	if !r.AddModels("open", add) || !r.AddModels("closed", add) || r.AddModels("nobody", add) {
		t.Fatal("AddModels: known providers take models, an unknown one does not")
	}
	for _, c := range []struct{ provider, model, want string }{
		{"open", "extra", "api-id"}, {"open", "anything", "anything"},
		{"closed", "extra", "api-id"}, {"closed", "own", "own-name"},
	} {
		_, m, err := r.Resolve(core.ModelRef{ProviderID: c.provider, ModelID: c.model})
		if err != nil || m.Name != c.want {
			t.Errorf("%s/%s: %q %v, want %q", c.provider, c.model, m.Name, err, c.want)
		}
	}
	if _, _, err := r.Resolve(core.ModelRef{ProviderID: "closed", ModelID: "anything"}); err == nil {
		t.Error("a provider with a list of models took another")
	}
}
