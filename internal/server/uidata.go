package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
)

// uiInitial is what the dashboard's page carries inline: the newest
// sessions and their statuses, as GET /session and GET /session/{id}/status
// answer this request's caller (a key that sees only its own sessions
// gets only those). The page draws them before its load event, so a tool
// that waits only for it (a headless screenshot) sees them. nil when
// anything fails: the page then reads them itself.
func (s *Server) uiInitial(r *http.Request) []byte {
	list := r.Clone(r.Context())
	list.URL = &url.URL{Path: "/session", RawQuery: "limit=200"}
	list.Header.Del("x-opencode-directory")
	var rec capture
	if e := s.listSessions(&rec, list); e != nil || rec.status != http.StatusOK {
		return nil
	}
	var sessions []struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(rec.body.Bytes(), &sessions) != nil {
		return nil
	}
	status := map[string]json.RawMessage{}
	for i, sess := range sessions {
		if i == 100 {
			break
		}
		b, err := s.st.SessionStatusJSON(r.Context(), sess.ID)
		if err != nil {
			continue // deleted meanwhile
		}
		status[sess.ID] = b
	}
	out, err := json.Marshal(map[string]any{"sessions": json.RawMessage(bytes.TrimSpace(rec.body.Bytes())), "status": status})
	if err != nil {
		return nil
	}
	// Inside a <script> element: no "</script>" may appear, whatever a
	// session's title says.
	var safe bytes.Buffer
	json.HTMLEscape(&safe, out)
	return safe.Bytes()
}

// capture is a ResponseWriter that keeps what a handler answers.
type capture struct {
	hdr    http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header {
	if c.hdr == nil {
		c.hdr = http.Header{}
	}
	return c.hdr
}

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}
