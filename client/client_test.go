package client

import (
	"strings"
	"testing"
)

func FuzzReadSSE(f *testing.F) {
	f.Add("id: 1\ndata: {\"id\":\"1\",\"type\":\"x\",\"properties\":{}}\n\n")
	f.Add("data: {\"type\":\"server.connected\",\"properties\":{}}\n\n: comment\n\n")
	f.Add("data: {\ndata: }\n\n")
	f.Add("id: abc\ndata: null\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ReadSSE(strings.NewReader(s), func(ev Event) error { return nil })
	})
}

func TestReadSSE(t *testing.T) {
	t.Parallel()
	in := "data: {\"id\":\"e1\",\"type\":\"server.connected\",\"properties\":{}}\n\nid: 7\ndata: {\"id\":\"7\",\"type\":\"session.idle\",\"properties\":{\"sessionID\":\"s\"}}\n\n"
	var got []Event
	if err := ReadSSE(strings.NewReader(in), func(ev Event) error { got = append(got, ev); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 0 || got[1].Seq != 7 || got[1].Type != "session.idle" {
		t.Fatalf("events = %+v", got)
	}
}
