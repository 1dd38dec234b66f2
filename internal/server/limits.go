package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/core"
)

// Budgets of what a client can make the server keep. Each is far above
// what a person or an SDK sends, and each refusal names its limit.
const (
	maxTitleBytes    = 1 << 10
	maxMetadataBytes = 16 << 10
	maxRules         = 256
	maxRuleBytes     = 1 << 10
	// listBytes caps a list answer's body; the items past it are left to
	// the next page, which the Link header names.
	listBytes = 8 << 20
)

func checkTitle(t *string) *apiError {
	switch {
	case t == nil:
		return nil
	case len(*t) > maxTitleBytes:
		return badRequest("title: %d bytes is over the limit of %d bytes", len(*t), maxTitleBytes)
	case !utf8.ValidString(*t):
		return badRequest("title: not valid UTF-8")
	}
	return nil
}

func checkMetadata(m map[string]any) *apiError {
	if m == nil {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return badRequest("metadata: %v", err)
	}
	if len(b) > maxMetadataBytes {
		return badRequest("metadata: %d bytes of JSON is over the limit of %d bytes", len(b), maxMetadataBytes)
	}
	return nil
}

func validRules(rules []core.Rule) *apiError {
	if len(rules) > maxRules {
		return badRequest("permission: %d rules is over the limit of %d", len(rules), maxRules)
	}
	for i, r := range rules {
		if r.Permission == "" || r.Pattern == "" {
			return badRequest("permission[%d]: permission and pattern are required", i)
		}
		if len(r.Permission)+len(r.Pattern) > maxRuleBytes {
			return badRequest("permission[%d]: over the limit of %d bytes", i, maxRuleBytes)
		}
		if r.Action != core.ActionAllow && r.Action != core.ActionDeny && r.Action != core.ActionAsk {
			return badRequest("permission[%d].action: %q is not allow, deny or ask", i, r.Action)
		}
	}
	return nil
}

// writeList writes a JSON array ([] rather than null), holding as many of
// items as fit in listBytes: from the front when keepTail is false, from
// the back otherwise (a transcript keeps its newest messages). When items
// were left out, next sets the cursor of the page that continues the list
// after the last item kept, in the request's own query, which a Link
// header with rel="next" names.
func writeList[T any](w http.ResponseWriter, r *http.Request, items []T, keepTail bool, next func(q url.Values, lastKept T)) {
	encoded := make([][]byte, 0, len(items))
	size := 2
	last, cut := -1, false
	for k := range items {
		i := k
		if keepTail {
			i = len(items) - 1 - k
		}
		b, err := json.Marshal(items[i])
		if err != nil {
			writeError(w, &apiError{status: http.StatusInternalServerError, name: "UnknownError", msg: "encode response: " + err.Error()})
			return
		}
		if size+len(b)+1 > listBytes && len(encoded) > 0 {
			cut = true
			break
		}
		size += len(b) + 1
		encoded = append(encoded, b)
		last = i
	}
	if cut && next != nil {
		q := r.URL.Query()
		next(q, items[last])
		w.Header().Set("Link", "<"+r.URL.Path+"?"+q.Encode()+`>; rel="next"`)
		w.Header().Set("X-Agentd-List-Truncated", strconv.Itoa(len(items)-len(encoded)))
	}
	body := make([]byte, 0, size+1)
	body = append(body, '[')
	for k := range encoded {
		b := encoded[k]
		if keepTail {
			b = encoded[len(encoded)-1-k]
		}
		if k > 0 {
			body = append(body, ',')
		}
		body = append(body, b...)
	}
	body = append(body, ']', '\n')
	writeRaw(w, http.StatusOK, body)
}
