package llm

import "strings"

// knownPrices are list prices, in dollars per million tokens, of common
// models of the two providers agentd speaks to natively, as published when
// this table was written. Configuration (a model's "cost") overrides them.
var knownPrices = map[string]Price{
	"gpt-4.1":           {Input: 2.00, Output: 8.00, CacheRead: 0.50},
	"gpt-4.1-mini":      {Input: 0.40, Output: 1.60, CacheRead: 0.10},
	"gpt-4.1-nano":      {Input: 0.10, Output: 0.40, CacheRead: 0.025},
	"gpt-4o":            {Input: 2.50, Output: 10.00, CacheRead: 1.25},
	"gpt-4o-mini":       {Input: 0.15, Output: 0.60, CacheRead: 0.075},
	"gpt-5":             {Input: 1.25, Output: 10.00, CacheRead: 0.125},
	"gpt-5-mini":        {Input: 0.25, Output: 2.00, CacheRead: 0.025},
	"o3":                {Input: 2.00, Output: 8.00, CacheRead: 0.50},
	"o4-mini":           {Input: 1.10, Output: 4.40, CacheRead: 0.275},
	"claude-opus-4-1":   {Input: 15.00, Output: 75.00, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-opus-4":     {Input: 15.00, Output: 75.00, CacheRead: 1.50, CacheWrite: 18.75},
	"claude-sonnet-4-5": {Input: 3.00, Output: 15.00, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-sonnet-4":   {Input: 3.00, Output: 15.00, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1.00, Output: 5.00, CacheRead: 0.10, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.80, Output: 4.00, CacheRead: 0.08, CacheWrite: 1.00},
}

// knownLimits are context and output limits of the same models.
var knownLimits = map[string][2]int{
	"gpt-4.1": {1047576, 32768}, "gpt-4.1-mini": {1047576, 32768}, "gpt-4.1-nano": {1047576, 32768},
	"gpt-4o": {128000, 16384}, "gpt-4o-mini": {128000, 16384},
	"gpt-5": {400000, 128000}, "gpt-5-mini": {400000, 128000},
	"o3": {200000, 100000}, "o4-mini": {200000, 100000},
	"claude-opus-4-1": {200000, 32000}, "claude-opus-4": {200000, 32000},
	"claude-sonnet-4-5": {200000, 64000}, "claude-sonnet-4": {200000, 64000},
	"claude-haiku-4-5": {200000, 64000}, "claude-3-5-haiku": {200000, 8192},
}

// KnownPrice returns the built-in price of a model, matching dated names
// ("claude-sonnet-4-5-20250929") by their longest known prefix; nil when
// the model is unknown.
func KnownPrice(model string) *Price {
	best := ""
	for name := range knownPrices {
		if strings.HasPrefix(model, name) && len(name) > len(best) {
			best = name
		}
	}
	if best == "" {
		return nil
	}
	p := knownPrices[best]
	return &p
}
