package server

import "testing"

func TestResolvesToLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "[::1]": true, "localhost": true,
		"0.0.0.0": false, "192.0.2.1": false, "::": false, "no-such-host.invalid": false} {
		if got := ResolvesToLoopback(host); got != want {
			t.Errorf("ResolvesToLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}
