// Package scripted is agentd's built-in offline model. It obeys directives
// written in the latest user message, so demos and tests drive the real
// agent loop without a provider. Directives, one per line:
//
//	reply:TEXT            answer TEXT (streamed word by word)
//	reasoning:TEXT        think TEXT before answering
//	sleep:N               stream one chunk a second for N seconds (N may be fractional)
//	think:N               wait N seconds before answering, at every step (load tests
//	                      use it as the model's own time, to tell the server's apart)
//	fail:CODE[xK]         fail the first step with HTTP status CODE, K times (always without xK)
//	retryafter:S          ask for S seconds before the retry of a fail: answer (as a
//	                      provider's Retry-After; over HTTP, fakellm sends the header)
//	tool:NAME:{json}      call tool NAME with the JSON input, then answer with its result;
//	                      several tool lines run one per step, in order
//	say:TEXT              say TEXT before the first tool: call, in the same step (a step
//	                      of text and a tool call, as real models often answer)
//	loop:NAME:{json}      call tool NAME on every step, never answering
//	par:NAME:{json}       like tool:, but all par: lines are called together, in the
//	                      first step (parallel tool calls)
//	attachments:          answer with the pictures and documents the prompt carries
//	                      ("image image/png 68 bytes shot.png"), as the model got them
//
// The fake provider server (fakellm) understands these too, and more that
// only make sense over HTTP:
//
//	usage:IN,OUT[,CR,CW]  report these token counts (cache read/write optional)
//	disconnect:N          drop the connection after N streamed chunks
//	malformed:            send a chunk that is not valid JSON
//
// Without directives it echoes the prompt.
package scripted

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/llm"
)

// ProviderID and ModelID name the scripted model: "agentd/scripted".
const (
	ProviderID = "agentd"
	ModelID    = "scripted"
)

// Model is the scripted provider. The zero value is ready to use.
type Model struct {
	// Second is the length of one "second" of sleep:, for tests that want
	// slow streams without slow tests. Zero means time.Second.
	Second time.Duration
}

// Directives is a parsed prompt.
type Directives struct {
	Reply     string
	Reasoning string
	Sleep     float64
	Think     float64
	FailCode  int
	FailTimes int // 0: always
	Tools     []ToolCall
	// Say is streamed before the first of Tools, in its step.
	Say string
	// Parallel are called together, in the first step.
	Parallel []ToolCall
	Loop     *ToolCall
	Echo     string
	// Attachments answers with the prompt's pictures and documents.
	Attachments bool

	// Title answers a title request.
	Title string
	// Overflow refuses requests larger than this many bytes as too long
	// for the context window.
	Overflow int
	// SummarySleep slows summaries of a conversation holding it down by
	// this many seconds.
	SummarySleep float64

	RetryAfter string
	Usage      *llm.Usage
	Disconnect int
	Malformed  bool
}

// ToolCall is a scripted tool call.
type ToolCall struct {
	Name  string
	Input json.RawMessage
}

// unquote removes the double quotes that opencode run puts around an
// argument holding spaces ("reply:hello world"), so that such a line is
// still a directive.
func unquote(line string) string {
	if len(line) < 2 || line[0] != '"' || line[len(line)-1] != '"' {
		return line
	}
	return strings.ReplaceAll(line[1:len(line)-1], `\"`, `"`)
}

// Parse reads directives from a prompt. Lines that are not directives are
// ignored, unless there are no directives at all, in which case the prompt
// is echoed.
func Parse(text string) (Directives, error) {
	var d Directives
	found := false
	for _, line := range strings.Split(text, "\n") {
		line = unquote(strings.TrimSpace(line))
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch key {
		case "reply":
			d.Reply, found = val, true
		case "reasoning":
			d.Reasoning, found = val, true
		case "say":
			d.Say = val
		case "sleep":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f < 0 || f > 3600 {
				return d, fmt.Errorf("sleep: want seconds between 0 and 3600, got %q", val)
			}
			d.Sleep, found = f, true
		case "think":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f < 0 || f > 600 {
				return d, fmt.Errorf("think: want seconds between 0 and 600, got %q", val)
			}
			d.Think = f
		case "fail":
			code, times, hasTimes := strings.Cut(val, "x")
			c, err := strconv.Atoi(code)
			if err != nil || c < 400 || c > 599 {
				return d, fmt.Errorf("fail: want an HTTP status 400-599, got %q", code)
			}
			d.FailCode, found = c, true
			if hasTimes {
				k, err := strconv.Atoi(times)
				if err != nil || k < 1 {
					return d, fmt.Errorf("fail: want a positive count after x, got %q", times)
				}
				d.FailTimes = k
			}
		case "title":
			d.Title = strings.TrimSpace(val)
		case "overflow":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 {
				return d, fmt.Errorf("overflow: want a request size in bytes, got %q", val)
			}
			d.Overflow, found = n, true
		case "summarysleep":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f < 0 || f > 3600 {
				return d, fmt.Errorf("summarysleep: want seconds between 0 and 3600, got %q", val)
			}
			d.SummarySleep = f
		case "retryafter":
			d.RetryAfter, found = strings.TrimSpace(val), true
		case "usage":
			var u llm.Usage
			nums := strings.Split(val, ",")
			if len(nums) < 2 || len(nums) > 4 {
				return d, fmt.Errorf("usage: want IN,OUT[,CACHEREAD,CACHEWRITE], got %q", val)
			}
			dst := []*int64{&u.Input, &u.Output, &u.CacheRead, &u.CacheWrite}
			for i, n := range nums {
				v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
				if err != nil || v < 0 {
					return d, fmt.Errorf("usage: %q is not a token count", n)
				}
				*dst[i] = v
			}
			d.Usage, found = &u, true
		case "disconnect":
			k, err := strconv.Atoi(val)
			if err != nil || k < 0 {
				return d, fmt.Errorf("disconnect: want a chunk count, got %q", val)
			}
			d.Disconnect, found = k, true
		case "malformed":
			d.Malformed, found = true, true
		case "attachments":
			d.Attachments, found = true, true
		case "tool", "loop", "par":
			name, input, ok := strings.Cut(val, ":")
			if !ok || name == "" {
				return d, fmt.Errorf("%s: want NAME:{json}, got %q", key, val)
			}
			if input == "" {
				input = "{}"
			}
			if !json.Valid([]byte(input)) {
				return d, fmt.Errorf("%s:%s: input is not valid JSON", key, name)
			}
			tc := ToolCall{Name: name, Input: json.RawMessage(input)}
			switch key {
			case "loop":
				d.Loop = &tc
			case "par":
				d.Parallel = append(d.Parallel, tc)
			default:
				d.Tools = append(d.Tools, tc)
			}
			found = true
		}
	}
	if !found {
		d.Echo = strings.TrimSpace(text)
	}
	return d, nil
}

// Size is a request's size in bytes as the scripted model counts it
// (system prompt, messages and tools); its input tokens are a quarter of
// it.
func Size(req llm.Request) int {
	n := 0
	for _, s := range req.System {
		n += len(s)
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Schema)
	}
	for _, m := range req.Messages {
		for _, c := range m.Content {
			n += c.Size()
		}
	}
	return n
}

// Input implements llm.InputTaker: the scripted model takes pictures and
// PDFs, so that tests and demos can attach them.
func (*Model) Input(string) llm.Modalities { return llm.Modalities{Image: true, PDF: true} }

// attachments describes the pictures and documents of the latest user
// message, one per line, as the model received them.
func attachments(msgs []llm.Message) string {
	last := -1
	for i := len(msgs) - 1; i >= 0 && last < 0; i-- {
		if msgs[i].Role == llm.RoleUser && hasText(msgs[i]) {
			last = i
		}
	}
	if last < 0 {
		return "no attachments"
	}
	var lines []string
	for _, c := range msgs[last].Content {
		if c.Type != llm.ContentImage && c.Type != llm.ContentDocument {
			continue
		}
		what := c.URL
		if what == "" {
			raw, _ := base64.StdEncoding.DecodeString(c.Data)
			what = fmt.Sprintf("%s %d bytes", c.MediaType, len(raw))
		}
		line := c.Type + " " + what
		if c.Filename != "" {
			line += " " + c.Filename
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return "no attachments"
	}
	return strings.Join(lines, "\n")
}

// maxQuote bounds how much of a tool result the answer quotes.
const maxQuote = 1000

// Stream implements llm.Provider.
func (m *Model) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) error {
	prompt, results := lastTurn(req.Messages)
	d, err := Parse(prompt)
	if err != nil {
		return &llm.APIError{Message: "scripted model: " + err.Error(), StatusCode: 400}
	}
	if d.Think > 0 {
		if err := m.wait(ctx, d.Think); err != nil {
			return err
		}
	}
	usage := llm.Usage{Input: int64(Size(req)/4 + 1), Output: 1}
	if d.Usage != nil {
		usage = *d.Usage
	}
	if d.Overflow > 0 && Size(req) > d.Overflow {
		body := fmt.Sprintf(`{"error":{"code":"context_length_exceeded","message":"This request is %d bytes, more than the %d this model's context window holds."}}`, Size(req), d.Overflow)
		return &llm.APIError{Message: "context_length_exceeded: request too long for the context window", StatusCode: 400,
			Body: body, ContextOverflow: true}
	}
	switch req.Purpose {
	case llm.PurposeTitle:
		title := d.Title
		if title == "" {
			title = "Scripted session"
		}
		if d.Sleep > 0 {
			if err := m.wait(ctx, d.Sleep); err != nil {
				return err
			}
		}
		return m.say(ctx, emit, title, usage, false)
	case llm.PurposeSummary:
		if s := summarySleep(req.Messages); s > 0 {
			if err := m.wait(ctx, s); err != nil {
				return err
			}
		}
		return m.say(ctx, emit, summary(req.Messages), usage, false)
	}

	if d.FailCode != 0 && len(results) == 0 && (d.FailTimes == 0 || req.Attempt <= d.FailTimes) {
		return &llm.APIError{
			Message:    fmt.Sprintf("scripted failure %d (attempt %d)", d.FailCode, req.Attempt),
			StatusCode: d.FailCode,
			Retryable:  llm.RetryableStatus(d.FailCode),
			Auth:       d.FailCode == 401 || d.FailCode == 403,
			RetryAfter: retryAfter(d.RetryAfter),
		}
	}
	if d.Reasoning != "" && len(results) == 0 {
		if err := emit(llm.Event{Kind: llm.EventReasoning, Text: d.Reasoning}); err != nil {
			return err
		}
	}
	if d.Loop != nil {
		return m.call(emit, *d.Loop, len(results), usage)
	}
	if len(results) == 0 && len(d.Parallel) > 0 {
		for i, tc := range d.Parallel {
			if err := emit(llm.Event{Kind: llm.EventToolCall, CallID: fmt.Sprintf("call_p%d", i+1), Name: tc.Name, Input: tc.Input}); err != nil {
				return err
			}
		}
		return emit(llm.Event{Kind: llm.EventFinish, Finish: "tool-calls", Usage: usage})
	}
	if i := len(results) - len(d.Parallel); i >= 0 && i < len(d.Tools) {
		if i == 0 && d.Say != "" {
			if err := m.words(ctx, emit, d.Say, nil); err != nil {
				return err
			}
		}
		return m.call(emit, d.Tools[i], len(results), usage)
	}
	if d.Sleep > 0 {
		if err := m.sleep(ctx, d.Sleep, emit); err != nil {
			return err
		}
	}
	text := d.Reply
	if d.Echo != "" {
		text = d.Echo
	}
	if d.Attachments {
		text = strings.TrimSpace(text + "\n" + attachments(req.Messages))
	}
	if len(results) > 0 {
		last := results[len(results)-1]
		if text != "" {
			text += "\n"
		}
		status := "returned"
		if last.IsError {
			status = "failed"
		}
		quote := last.Text
		if len(quote) > maxQuote {
			// Quoting a long output whole would double what a tool adds
			// to the conversation.
			quote = quote[:maxQuote] + "…"
		}
		text += fmt.Sprintf("tool %s %s: %s", last.Name, status, quote)
	}
	return m.say(ctx, emit, text, usage, d.Usage == nil)
}

// say streams text word by word and finishes; count adds each word to the
// output tokens.
func (m *Model) say(ctx context.Context, emit func(llm.Event) error, text string, usage llm.Usage, count bool) error {
	var output *int64
	if count {
		output = &usage.Output
	}
	if err := m.words(ctx, emit, text, output); err != nil {
		return err
	}
	return emit(llm.Event{Kind: llm.EventFinish, Finish: "stop", Usage: usage})
}

// words streams text word by word, counting each in output when set.
func (m *Model) words(ctx context.Context, emit func(llm.Event) error, text string, output *int64) error {
	for i, w := range strings.SplitAfter(text, " ") {
		if w == "" {
			continue
		}
		if i > 0 && i%8 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := emit(llm.Event{Kind: llm.EventText, Text: w}); err != nil {
			return err
		}
		if output != nil {
			(*output)++
		}
	}
	return nil
}

// summarySleep finds a summarysleep: directive in a conversation's prompts.
func summarySleep(msgs []llm.Message) float64 {
	for _, m := range msgs {
		for _, c := range m.Content {
			if c.Type != llm.ContentText || !strings.Contains(c.Text, "summarysleep:") {
				continue
			}
			if d, err := Parse(c.Text); err == nil && d.SummarySleep > 0 {
				return d.SummarySleep
			}
		}
	}
	return 0
}

// retryAfter is the delay a retryafter: directive asks for: seconds, as
// in a Retry-After header; none when absent or not a number.
func retryAfter(v string) time.Duration {
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// wait sleeps for seconds of the model's time, or until ctx ends.
func (m *Model) wait(ctx context.Context, seconds float64) error {
	unit := m.Second
	if unit == 0 {
		unit = time.Second
	}
	t := time.NewTimer(time.Duration(seconds * float64(unit)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// summary is the scripted model's summary of a conversation: how many
// messages it had and the start of each prompt, so that tests can tell
// what it covered.
func summary(msgs []llm.Message) string {
	var prompts []string
	for _, m := range msgs[:max(len(msgs)-1, 0)] {
		if m.Role != llm.RoleUser {
			continue
		}
		for _, c := range m.Content {
			if c.Type == llm.ContentText && c.Text != "" {
				t := strings.ReplaceAll(c.Text, "\n", " ")
				if len(t) > 40 {
					t = t[:40]
				}
				prompts = append(prompts, t)
			}
		}
	}
	return fmt.Sprintf("Summary of %d messages. Prompts: %s", len(msgs)-1, strings.Join(prompts, " | "))
}

func (m *Model) call(emit func(llm.Event) error, tc ToolCall, n int, usage llm.Usage) error {
	if err := emit(llm.Event{Kind: llm.EventToolCall, CallID: fmt.Sprintf("call_%d", n+1), Name: tc.Name, Input: tc.Input}); err != nil {
		return err
	}
	return emit(llm.Event{Kind: llm.EventFinish, Finish: "tool-calls", Usage: usage})
}

func (m *Model) sleep(ctx context.Context, seconds float64, emit func(llm.Event) error) error {
	unit := m.Second
	if unit == 0 {
		unit = time.Second
	}
	// One chunk per whole second, and one for a fractional remainder.
	left := time.Duration(seconds * float64(unit))
	t := time.NewTimer(min(unit, left))
	defer t.Stop()
	for i := 1; left > 0; i++ {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		if err := emit(llm.Event{Kind: llm.EventText, Text: fmt.Sprintf("tick %d ", i)}); err != nil {
			return err
		}
		left -= min(unit, left)
		if left > 0 {
			t.Reset(min(unit, left))
		}
	}
	return nil
}

// toolResult is a tool outcome seen after the last user prompt.
type toolResult struct {
	Name    string
	Text    string
	IsError bool
}

// lastTurn returns the text of the latest user message and the tool
// results that followed it.
func lastTurn(msgs []llm.Message) (string, []toolResult) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser && hasText(msgs[i]) {
			last = i
			break
		}
	}
	if last < 0 {
		return "", nil
	}
	var sb strings.Builder
	for _, c := range msgs[last].Content {
		if c.Type == llm.ContentText {
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(c.Text)
		}
	}
	names := map[string]string{}
	var results []toolResult
	for _, m := range msgs[last+1:] {
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentToolCall:
				names[c.CallID] = c.Name
			case llm.ContentToolResult:
				results = append(results, toolResult{Name: names[c.CallID], Text: c.Text, IsError: c.IsError})
			}
		}
	}
	return sb.String(), results
}

func hasText(m llm.Message) bool {
	for _, c := range m.Content {
		if c.Type == llm.ContentText {
			return true
		}
	}
	return false
}
