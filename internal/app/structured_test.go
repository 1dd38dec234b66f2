package app_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentd/agentd/client"
	"github.com/agentd/agentd/internal/core"
)

var answerSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)

// TestStructuredOutput: a prompt with a json_schema format gets its answer
// through the StructuredOutput tool, checked against the schema (an
// invalid one is corrected by the model), in the message's structured
// field; a model that answers in text fails the run with opencode's
// StructuredOutputError.
func TestStructuredOutput(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	ctx := t.Context()
	sid := n.session()
	m, err := n.c.Send(ctx, sid, client.Prompt{Schema: answerSchema,
		Text: `tool:StructuredOutput:{"answer":5}` + "\n" + `tool:StructuredOutput:{"answer":"forty-two"}` + "\nreply:never sent"})
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Info.Structured) != `{"answer":"forty-two"}` {
		t.Fatalf("structured = %s (parts %+v)", m.Info.Structured, m.Parts)
	}
	if st := n.status(sid); st.Last.Outcome != core.RunSucceeded {
		t.Errorf("outcome = %+v", st.Last)
	}
	msgs := mustMessages(t, n, sid)
	if msgs[0].Info.Format == nil || msgs[0].Info.Format.Type != "json_schema" {
		t.Errorf("the prompt's format was not kept: %+v", msgs[0].Info.Format)
	}
	var calls []string
	for _, mm := range msgs {
		for _, p := range mm.Parts {
			if p.Type == core.PartTool {
				calls = append(calls, p.State.Status)
			}
		}
	}
	if strings.Join(calls, ",") != "error,completed" {
		t.Errorf("StructuredOutput calls = %v (want the invalid one corrected)", calls)
	}

	// Plain text instead: the run fails with StructuredOutputError.
	_, err = n.c.Send(ctx, sid, client.Prompt{Schema: answerSchema, Text: "reply:just text"})
	var ce *client.Error
	st := n.status(sid)
	if st.Last.Outcome != core.RunFailed || st.Last.Error == nil || st.Last.Error.Name != "StructuredOutputError" {
		t.Errorf("plain answer: %+v (%v)", st.Last, err)
	}
	_ = errors.As(err, &ce)

	// A schema that does not compile is refused at once.
	_, err = n.c.Send(ctx, sid, client.Prompt{Schema: json.RawMessage(`{"type":12}`), Text: "reply:x"})
	if !errors.As(err, &ce) || ce.StatusCode != 400 || !strings.Contains(ce.Message, "format.schema") {
		t.Errorf("bad schema: %v", err)
	}
}
