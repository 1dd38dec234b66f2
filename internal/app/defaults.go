package app

import (
	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm/scripted"
)

var scriptedRef = core.ModelRef{ProviderID: scripted.ProviderID, ModelID: scripted.ModelID}
