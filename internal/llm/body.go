package llm

import (
	"bytes"
	"encoding/json"
)

// EncodeBody encodes a provider's request body, without the HTML escaping
// encoding/json adds by default (no provider needs it, and it bloats
// prompts full of code). Only a raw JSON field that is not JSON can make
// encoding fail (a tool schema from an MCP server, say): repair then
// clears such fields, and the body is encoded again. Checking them up
// front would scan every tool input of the conversation at every step,
// which the encoder does anyway.
func EncodeBody(v any, repair func()) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err == nil {
		return buf.Bytes(), nil
	}
	repair()
	buf.Reset()
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
