package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

type item struct {
	ID   string `json:"id"`
	Body string `json:"body"`
}

// TestWriteListStopsAtBytes: a list larger than listBytes is cut, keeping
// the front (or the tail), with a Link to the rest in the request's query.
func TestWriteListStopsAtBytes(t *testing.T) {
	t.Parallel()
	var items []item
	for _, id := range "abcdefghijklmnopqrst" {
		items = append(items, item{ID: string(id), Body: strings.Repeat("x", 1<<20)})
	}
	for _, tail := range []bool{false, true} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/list?limit=50", nil)
		writeList(rec, req, items, tail, func(q url.Values, last item) { q.Set("cursor", last.ID) })
		var got []item
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusOK || rec.Body.Len() > listBytes || len(got) != 7 {
			t.Fatalf("tail %v: %d, %d bytes, %d items", tail, rec.Code, rec.Body.Len(), len(got))
		}
		want, link := "a", `</list?cursor=g&limit=50>; rel="next"`
		if tail {
			want, link = "n", `</list?cursor=n&limit=50>; rel="next"`
		}
		if got[0].ID != want || rec.Header().Get("Link") != link {
			t.Errorf("tail %v: first %s, Link %q", tail, got[0].ID, rec.Header().Get("Link"))
		}
	}
	rec := httptest.NewRecorder()
	writeList(rec, httptest.NewRequest("GET", "/list", nil), []item(nil), false, nil)
	if rec.Body.String() != "[]\n" || rec.Header().Get("Link") != "" {
		t.Errorf("empty list: %q", rec.Body.String())
	}
}
