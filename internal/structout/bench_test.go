package structout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The figures in docs/ARCHITECTURE.md: the work of a valid answer at the
// size limit against a realistic schema, the worst answer the budget
// accepts (every branch of shared anyOfs failing), and compiling the
// deepest schemas at the size limit.

const benchSchema = `{"type":"object","properties":{"summary":{"type":"string"},"items":{"type":"array","items":{"type":"object",
"properties":{"name":{"type":"string","minLength":1},"price":{"type":"number","minimum":0},"kind":{"enum":["book","film","game","music"]},
"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true},
"meta":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/meta"}]}},
"required":["name","price","kind","tags","meta"],"additionalProperties":false}}},"required":["summary","items"],"additionalProperties":false,
"$defs":{"meta":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z0-9-]+$"},"rank":{"type":"integer"}},"required":["id"],"additionalProperties":false}}}`

func benchAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"summary":"a list","items":[`)
	for i := 0; b.Len() < n-200; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"item number %d","price":%d.5,"kind":"book","tags":["a","b","c%d"],"meta":{"id":"id-%d","rank":%d}}`, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func units(s *Schema, answer []byte) int {
	var inst any
	_ = json.Unmarshal(answer, &inst)
	e := &estimate{c: s.cost, left: 1 << 40}
	e.eval(s.cost.root, inst, 0, false)
	return 1<<40 - e.left
}

func BenchmarkValidateRealistic(b *testing.B) {
	s, err := Compile([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	answer := benchAnswer(MaxAnswerBytes)
	b.SetBytes(int64(len(answer)))
	for b.Loop() {
		if err := s.Validate(answer); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(units(s, answer)), "units")
}

func BenchmarkValidateWorstAccepted(b *testing.B) {
	// The largest anyOf bomb whose failing answer fits the budget.
	n := 1
	for {
		s, _ := Compile([]byte(bombSchema(n + 1)))
		if units(s, []byte("5")) > MaxWork {
			break
		}
		n++
	}
	s, _ := Compile([]byte(bombSchema(n)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate([]byte("5")); err == nil || err == ErrTooCostly {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(units(s, []byte("5"))), "units")
}

func bombSchema(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string"}}}`, n)
	return b.String()
}

func BenchmarkCompileDeepest(b *testing.B) {
	deep := strings.Repeat(`{"items":`, MaxSchemaDepth-3) + `{}` + strings.Repeat(`}`, MaxSchemaDepth-3)
	var s strings.Builder
	s.WriteString(`{"anyOf":[`)
	for i := 0; s.Len()+len(deep)+10 < MaxSchemaBytes; i++ {
		if i > 0 {
			s.WriteString(",")
		}
		s.WriteString(deep)
	}
	s.WriteString(`]}`)
	for b.Loop() {
		if _, err := Compile([]byte(s.String())); err != nil {
			b.Fatal(err)
		}
	}
}
