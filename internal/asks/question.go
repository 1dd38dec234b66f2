package asks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/tool"
)

// QuestionToolName is the name of the question tool.
const QuestionToolName = "question"

// QuestionTool lets the model ask the user questions with choices, as
// opencode's does. The engine answers its calls (it records the durable
// request and waits for the user); this is what the model is offered and
// what it is told of the answers.
type QuestionTool struct{}

// Name is the tool's name.
func (QuestionTool) Name() string { return QuestionToolName }

// ReadOnly says a question changes no file.
func (QuestionTool) ReadOnly() bool { return true }

// Description tells the model when to ask.
func (QuestionTool) Description() string {
	return "Asks the user one or more questions, each with a few choices, and returns the answers. Use it when the " +
		"task cannot go on well without the user's decision (which of several approaches, a missing requirement); " +
		"do not use it for what you can find out yourself. Each question has a short header (at most 30 " +
		"characters), the question, and options (label of 1-5 words, description); set multiple when several " +
		"choices may be picked. The user may also write an answer of their own."
}

// Schema is the input's JSON Schema.
func (QuestionTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"questions":{"type":"array","items":{"type":"object","properties":{` +
		`"question":{"type":"string"},"header":{"type":"string"},"multiple":{"type":"boolean"},"options":{"type":"array","items":` +
		`{"type":"object","properties":{"label":{"type":"string"},"description":{"type":"string"}},"required":["label","description"]}}},` +
		`"required":["question","header","options"]}}},"required":["questions"]}`)
}

// Run is not used: the engine asks.
func (QuestionTool) Run(context.Context, tool.Call) (tool.Result, error) {
	return tool.Errorf("the question tool is answered by the user"), nil
}

// Questions reads a question call's input. When it holds no valid
// question, it returns the result the model is given instead.
func Questions(input json.RawMessage) ([]core.QuestionInfo, *tool.Result) {
	var in struct {
		Questions []core.QuestionInfo `json:"questions"`
	}
	if err := json.Unmarshal(input, &in); err != nil || len(in.Questions) == 0 {
		res := tool.Errorf("invalid input: questions must be a list of {question, header, options}")
		return nil, &res
	}
	for i := range in.Questions {
		if in.Questions[i].Options == nil {
			in.Questions[i].Options = []core.QuestionOption{}
		}
	}
	return in.Questions, nil
}

// QuestionResult is what the model is told of the user's answers.
func QuestionResult(q core.QuestionRequest) tool.Result {
	if q.Rejected {
		return tool.Result{Output: "The user dismissed these questions without answering.", IsError: true,
			Metadata: map[string]any{"answers": [][]string{}}}
	}
	var sb strings.Builder
	sb.WriteString("The user answered:")
	for i, qi := range q.Questions {
		ans := "(no answer)"
		if i < len(q.Answers) && len(q.Answers[i]) > 0 {
			ans = strings.Join(q.Answers[i], ", ")
		}
		fmt.Fprintf(&sb, "\n- %q: %s", qi.Question, ans)
	}
	return tool.Result{Output: sb.String(), Title: fmt.Sprintf("Asked %d question(s)", len(q.Questions)),
		Metadata: map[string]any{"answers": q.Answers}}
}
