package apiv2

import "net/http"

// The terminal routes (/api/pty*) answer a clear refusal for now: one
// terminal implementation serves both APIs, the pty package behind the v1
// /pty routes, and these routes are wired to it when the two meet.
func ptyRefused(w http.ResponseWriter, r *http.Request) *apiError {
	return tagged(http.StatusNotImplemented, "NotImplementedError",
		"terminals are not served on /api/pty by this build: agentd's terminals are the pty package's (the v1 /pty routes), "+
			"which these routes are wired to once it is part of the build")
}
