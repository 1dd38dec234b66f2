package server

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/core"
)

// The hand-written status list says exactly what the reflecting encoder of
// opencode's shape says.
func TestAppendStatusList(t *testing.T) {
	t.Parallel()
	for name, m := range map[string]map[string]core.SessionStatus{
		"empty": {},
		"busy and retry": {
			"ses_a": {Type: core.StatusBusy, RunID: "run_1", Since: 5, Phase: "tool"},
			"ses_b": {Type: core.StatusRetry, RunID: "run_2", Attempt: 2, Message: "rate \"limited\"\n", Next: 99},
		},
		"odd id": {"ses_\"q\\\x01é": {Type: core.StatusBusy}},
	} {
		want := map[string]core.OpencodeStatus{}
		for id, st := range m {
			want[id] = st.Opencode()
		}
		b := appendStatusList(nil, m)
		var got map[string]core.OpencodeStatus
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v in %s", name, err, b)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
