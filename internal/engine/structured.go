package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/structout"
	"github.com/agentd/agentd/internal/tool"
)

// Structured output, as opencode does it: a prompt whose format is
// json_schema gives the model a StructuredOutput tool whose input is the
// schema, tells it to answer through that tool, and makes it call a tool.
// The tool's input is checked against the schema: valid, it is the
// answer (the assistant message's structured field) and the run ends; not
// valid, the model is told why and tries again, RetryCount times (2 by
// default). A model that never complies, or answers in plain text, ends
// the run failed with opencode's StructuredOutputError. The schema and
// the answers are checked within bounds (internal/structout).

// StructuredOutputTool is the name of the tool that takes the answer.
const StructuredOutputTool = "StructuredOutput"

// defaultStructuredRetries is how many invalid answers are corrected when
// the format gives no retryCount.
const defaultStructuredRetries = 2

// structuredInstruction is added to the system prompt.
const structuredInstruction = "The user asked for structured output: give your final answer by calling the " +
	StructuredOutputTool + " tool with it, as JSON matching the tool's schema. Do not answer in plain text."

// structured is a run's structured-output state.
type structured struct {
	schema  *structout.Schema
	retries int // corrections allowed
	failed  int // invalid answers so far
	answer  json.RawMessage
}

// compileFormat checks an output format a prompt carries.
func compileFormat(f *core.OutputFormat) (*structout.Schema, error) {
	if f == nil || f.Type == "" || f.Type == "text" {
		return nil, nil
	}
	if f.Type != core.FormatJSONSchema {
		return nil, fmt.Errorf("format.type: %q is not text or json_schema", f.Type)
	}
	if f.RetryCount != nil && *f.RetryCount < 0 {
		return nil, fmt.Errorf("format.retryCount: %d is negative", *f.RetryCount)
	}
	s, err := structout.Compile(f.Schema)
	if err != nil {
		return nil, fmt.Errorf("format.schema: %w", err)
	}
	return s, nil
}

// setupStructured prepares the run for its prompt's format: the tool, the
// instruction and the required tool call.
func (r *runner) setupStructured(f *core.OutputFormat) error {
	schema, err := compileFormat(f)
	if err != nil || schema == nil {
		r.structured = nil
		return err
	}
	retries := defaultStructuredRetries
	if f.RetryCount != nil {
		retries = *f.RetryCount
	}
	r.structured = &structured{schema: schema, retries: retries}
	r.tools = append(r.tools, llm.ToolSpec{Name: StructuredOutputTool,
		Description: "Gives the final answer as JSON matching the schema. Call it once, with the whole answer; nothing follows it.",
		Schema:      f.Schema})
	r.system = append(r.system, structuredInstruction)
	return nil
}

// takeStructured checks a StructuredOutput call's input: the answer when
// valid; else the model is told what is wrong, or, past the retries, the
// run fails.
func (r *runner) takeStructured(p *core.Part) (tool.Result, *outcome) {
	s := r.structured
	if s == nil {
		res := tool.Errorf("no structured output was asked for")
		return res, nil
	}
	err := s.schema.Validate(p.State.Input)
	if err == nil {
		s.answer = append(json.RawMessage(nil), p.State.Input...)
		return tool.Result{Output: "Structured output captured.", Title: "Structured output"}, nil
	}
	s.failed++
	if s.failed > s.retries {
		o := structuredFailure(fmt.Sprintf("the answer did not match the schema after %d attempts: %v", s.failed, err), s.failed-1)
		return tool.Errorf("the answer does not match the schema"), &o
	}
	return tool.Errorf("The answer does not match the schema: " + err.Error() + ". Call " + StructuredOutputTool + " again with a corrected answer."), nil
}

// structuredFailure is the outcome of a run whose model never gave a
// valid structured answer.
func structuredFailure(msg string, retries int) outcome {
	e := core.NewError("StructuredOutputError", msg)
	e.Data.Extra = map[string]any{"retries": retries}
	return outcome{state: core.RunFailed, reason: core.ReasonStructuredOutput, err: e}
}

// structuredCall records a StructuredOutput call: running, then its
// result; done when the run must end (it failed, or was cancelled).
func (r *runner) structuredCall(ctx context.Context, p *core.Part) (outcome, bool) {
	res, fail := r.takeStructured(p)
	p.State = core.ToolState{Status: core.ToolRunning, Input: p.State.Input, Time: core.PartTime{Start: r.e.now()}}
	if err := r.putPart(ctx, *p); err != nil {
		return outcome{}, true
	}
	if o, done := r.execTool(ctx, nil, tool.Call{}, p, &res); done {
		return o, true
	}
	if fail != nil {
		return *fail, true
	}
	return outcome{}, false
}
