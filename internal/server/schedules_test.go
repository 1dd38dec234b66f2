package server_test

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/server"
)

// TestScheduleRoutesRefuse: a schedule that could never fire, or fire
// into nothing, is refused with 400 and the reason, before it is stored;
// an unknown schedule is 404.
func TestScheduleRoutesRefuse(t *testing.T) {
	t.Parallel()
	a := start(t, server.Security{LoopbackOnly: true})
	base := a.URL()
	sid := string(call(t, "POST", base+"/session", `{}`, nil).body)
	sid = sid[strings.Index(sid, `"id":"`)+6:]
	sid = sid[:strings.Index(sid, `"`)]
	for body, want := range map[string]string{
		`{"cron":"0 0 30 2 *","prompt":"p","sessionID":"` + sid + `"}`:                "never fires",
		`{"cron":"61 * * * *","prompt":"p","sessionID":"` + sid + `"}`:                "minute",
		`{"every":"1m","prompt":"p","sessionID":"ses_gone"}`:                          "does not exist",
		`{"every":"1m","prompt":"p"}`:                                                 "newSession",
		`{"every":"1m","prompt":"p","sessionID":"` + sid + `","agent":"nobody"}`:      "no agent",
		`{"every":"1m","prompt":"p","sessionID":"` + sid + `","agent":"general"}`:     "subagent",
		`{"every":"1m","prompt":"p","newSession":true,"directory":"/no/such/place"}`:  "does not exist",
		`{"every":"1m","prompt":"p","sessionID":"` + sid + `","when":"later"}`:        "when",
		`{"every":"soon","prompt":"p","sessionID":"` + sid + `"}`:                     "every",
		`{"every":"1m","prompt":"p","sessionID":"` + sid + `","busy":"interrupt"}`:    "busy",
		`{"cron":"@hourly","timezone":"Nowhere/Town","prompt":"p","newSession":true}`: "timezone",
	} {
		r := call(t, "POST", base+"/schedule", body, nil)
		if r.status != 400 || !strings.Contains(string(r.body), want) {
			t.Errorf("%s: %d %s, want 400 about %q", body, r.status, r.body, want)
		}
	}
	if r := call(t, "GET", base+"/schedule", "", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("refused schedules were stored: %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if r := call(t, m, base+"/schedule/sch_nope", "", nil); r.status != 404 {
			t.Errorf("%s an unknown schedule: %d %s", m, r.status, r.body)
		}
	}
}
