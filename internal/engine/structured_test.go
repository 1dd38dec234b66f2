package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/core"
	"github.com/agentd/agentd/internal/engine"
)

var answerSchema = []byte(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)

// structuredRun runs a prompt asking for structured output with the
// given retryCount (nil: the default) and waits for its end.
func (n *node) structuredRun(schema []byte, retries *int, text string) core.Run {
	n.t.Helper()
	adm, err := n.e.Prompt(n.t.Context(), n.session(), engine.PromptInput{
		Parts:  []engine.InputPart{{Type: core.PartText, Text: text}},
		Format: &core.OutputFormat{Type: core.FormatJSONSchema, Schema: schema, RetryCount: retries}})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(n.t.Context(), 30*time.Second)
	defer cancel()
	run, err := n.e.WaitRun(ctx, adm.RunID)
	if err != nil {
		n.t.Fatal(err)
	}
	return run
}

// TestStructuredRetryCount: a format's retryCount is exactly how many
// invalid answers are corrected: one more invalid answer fails the run,
// and a valid answer after that is never taken (a mutation that allowed
// one retry too many survived the earlier tests).
func TestStructuredRetryCount(t *testing.T) {
	t.Parallel()
	const bad, good = `tool:StructuredOutput:{"answer":5}`, `tool:StructuredOutput:{"answer":"ok"}`
	one, zero := 1, 0
	for _, c := range []struct {
		name    string
		retries *int
		script  []string
		state   core.RunState
		steps   int
	}{
		{"retryCount 1: two invalid answers fail", &one, []string{bad, bad, good}, core.RunFailed, 2},
		{"retryCount 1: one invalid answer is corrected", &one, []string{bad, good}, core.RunSucceeded, 2},
		{"retryCount 0: no correction", &zero, []string{bad, good}, core.RunFailed, 1},
		{"default: two corrections", nil, []string{bad, bad, good}, core.RunSucceeded, 3},
		{"default: a third invalid answer fails", nil, []string{bad, bad, bad, good}, core.RunFailed, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, nil)
			run := n.structuredRun(answerSchema, c.retries, strings.Join(c.script, "\n")+"\nreply:never")
			if run.State != c.state || run.Steps != c.steps {
				t.Fatalf("run ended %s/%s after %d steps, want %s after %d (error %v)", run.State, run.Reason, run.Steps, c.state, c.steps, run.Error)
			}
			if c.state == core.RunFailed {
				want := c.steps - 1
				if run.Reason != core.ReasonStructuredOutput || run.Error == nil || run.Error.Name != "StructuredOutputError" ||
					fmt.Sprint(run.Error.Data.Extra["retries"]) != fmt.Sprint(want) {
					t.Errorf("failure: %s %+v, want StructuredOutputError with retries %d", run.Reason, run.Error, want)
				}
			}
		})
	}
}

// TestHostileSchemas: a prompt's schema is refused at admission when it
// is over the size or depth limit or reads outside itself (a $ref to a
// local file compiled it from the file; a FIFO hung the request), and an
// answer whose check would be exponential is refused as too costly
// instead of validated (a 1.3 KB schema took minutes and gigabytes).
func TestHostileSchemas(t *testing.T) {
	t.Parallel()
	n := newNode(t, nil)
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ schema, want string }{
		"size":  {`{"description":"` + strings.Repeat("x", 70<<10) + `"}`, "over the limit of 65536 bytes"},
		"depth": {strings.Repeat(`{"not":`, 100) + `{}` + strings.Repeat(`}`, 100), "nested more than 64 levels deep"},
		"file":  {`{"$ref":"file://` + file + `"}`, "only references inside the schema"},
	} {
		in := engine.PromptInput{Parts: []engine.InputPart{{Type: core.PartText, Text: "reply:x"}},
			Format: &core.OutputFormat{Type: core.FormatJSONSchema, Schema: []byte(c.schema)}}
		_, err := n.e.Prompt(t.Context(), n.session(), in)
		var ie *engine.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "format.schema") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an input error saying %q", name, err, c.want)
		}
	}

	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range 18 {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	b.WriteString(`"d18":{"type":"string"}}}`)
	zero := 0
	run := n.structuredRun([]byte(b.String()), &zero, "tool:StructuredOutput:5\nreply:never")
	if run.State != core.RunFailed || run.Error == nil || !strings.Contains(run.Error.Data.Message, "too much work") || len(run.Error.Data.Message) > 4000 {
		msg := ""
		if run.Error != nil {
			msg = run.Error.Data.Message[:min(len(run.Error.Data.Message), 300)]
		}
		t.Errorf("the exponential answer: %s/%s %q", run.State, run.Reason, msg)
	}
}
