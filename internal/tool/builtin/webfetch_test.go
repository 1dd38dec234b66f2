package builtin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/tool"
)

func fetch(t *testing.T, w WebFetch, input string) tool.Result {
	t.Helper()
	res, err := w.Run(t.Context(), tool.Call{Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("webfetch %s: Go error %v (a failed fetch is a result the model sees)", input, err)
	}
	return res
}

func TestWebFetch(t *testing.T) {
	t.Parallel()
	page := `<html><head><title>T</title><script>var secret = 1;</script></head>
		<body><h1>Release notes</h1><p>See <a href="https://example.com/x">the list</a>.</p><style>p{}</style></body></html>`
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("x", 1<<20)
		for range 6 {
			fmt.Fprint(w, chunk)
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/missing", http.NotFound)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	mux.HandleFunc("/to-other-loopback", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://127.0.0.2:%d/page", port), http.StatusFound)
	})
	allowed := WebFetch{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

	for _, tc := range []struct {
		name, input   string
		want, wantNot []string
		wantErr       string
		w             WebFetch
	}{
		{name: "markdown", w: allowed, input: `{"url":"` + srv.URL + `/page"}`,
			want: []string{"# Release notes", "[the list](https://example.com/x)"}, wantNot: []string{"secret", "<h1>"}},
		{name: "text", w: allowed, input: `{"url":"` + srv.URL + `/page","format":"text"}`,
			want: []string{"Release notes", "See", "the list"}, wantNot: []string{"secret", "p{}", "<", "https://example.com"}},
		{name: "html", w: allowed, input: `{"url":"` + srv.URL + `/page","format":"html"}`, want: []string{"<h1>Release notes</h1>"}},
		{name: "not html", w: allowed, input: `{"url":"` + srv.URL + `/json"}`, want: []string{`{"ok":true}`}},
		{name: "loopback refused", input: `{"url":"` + srv.URL + `/page"}`, wantErr: "127.0.0.1 is on this machine or a private network"},
		{name: "a name for loopback refused", input: fmt.Sprintf(`{"url":"http://localhost:%d/page"}`, port), wantErr: "on this machine or a private network"},
		{name: "redirect to a refused address", w: allowed, input: `{"url":"` + srv.URL + `/to-other-loopback"}`, wantErr: "127.0.0.2 is on this machine"},
		{name: "link-local refused", input: `{"url":"http://169.254.169.254/latest/meta-data/"}`, wantErr: "169.254.169.254 is on this machine or a private network"},
		{name: "private refused", input: `{"url":"http://10.1.2.3/"}`, wantErr: "10.1.2.3 is on this machine or a private network"},
		{name: "too big", w: allowed, input: `{"url":"` + srv.URL + `/big"}`, wantErr: "more than the 5242880 bytes allowed"},
		{name: "timeout", w: allowed, input: `{"url":"` + srv.URL + `/slow","timeout":0.3}`, wantErr: "no answer within 300ms"},
		{name: "not found", w: allowed, input: `{"url":"` + srv.URL + `/missing"}`, wantErr: "404 Not Found"},
		{name: "not http", input: `{"url":"file:///etc/passwd"}`, wantErr: "want an http:// or https:// address"},
		{name: "bad format", input: `{"url":"http://example.com","format":"pdf"}`, wantErr: `format "pdf"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := fetch(t, tc.w, tc.input)
			if tc.wantErr != "" {
				if !res.IsError || !strings.Contains(res.Output, tc.wantErr) {
					t.Errorf("result %q (error %v), want an error saying %q", res.Output, res.IsError, tc.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("error result %q", res.Output)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Output, w) {
					t.Errorf("output %q lacks %q", res.Output, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(res.Output, w) {
					t.Errorf("output %q holds %q", res.Output, w)
				}
			}
		})
	}
}

func TestWebFetchNeedsPermission(t *testing.T) {
	t.Parallel()
	needs := WebFetch{}.Needs(tool.Call{Input: json.RawMessage(`{"url":"https://example.com/a"}`)})
	if len(needs) != 1 || needs[0].Permission != "webfetch" || needs[0].Patterns[0] != "https://example.com/a" {
		t.Errorf("needs = %+v", needs)
	}
}
