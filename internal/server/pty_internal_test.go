package server

import (
	"strings"
	"testing"
)

// TestTerminalWebsocketIsLong: the websocket route gets no write
// deadline, which would cut a terminal open longer than writeTimeout.
func TestTerminalWebsocketIsLong(t *testing.T) {
	t.Parallel()
	for _, rt := range (&Server{}).ptyRoutes() {
		if long := longRoute(rt); long != strings.HasSuffix(rt.pattern, "/connect") {
			t.Errorf("%s %s: long route %v", rt.method, rt.pattern, long)
		}
	}
}
