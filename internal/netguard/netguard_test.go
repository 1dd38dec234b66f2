package netguard_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/netguard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	open := netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, Key: "agentd.test.allow"}
	for addr, refused := range map[string]bool{
		"127.0.0.1":        true,
		"::1":              true,
		"::ffff:127.0.0.1": true, // the v4 address inside a v6 one
		"10.2.3.4":         true,
		"192.168.1.1":      true,
		"172.16.0.1":       true,
		"100.64.0.1":       true,
		"169.254.169.254":  true,
		"fe80::1":          true,
		"fd00::1":          true,
		"0.0.0.0":          true,
		"224.0.0.1":        true,
		"10.1.2.3":         false, // opened by Allow
		"8.8.8.8":          false,
		"2001:4860::8888":  false,
	} {
		err := open.CheckAddr(netip.MustParseAddr(addr))
		if got := errors.Is(err, netguard.ErrRefused); got != refused {
			t.Errorf("%s: refused %v, want %v (%v)", addr, got, refused, err)
		}
		if err != nil && !strings.Contains(err.Error(), "agentd.test.allow") {
			t.Errorf("%s: the refusal %q does not name the setting", addr, err)
		}
	}
}

// TestDialerChecksWhatItConnects: the dialer's check sees the address each
// connection is about to use, after the name is resolved, so a name that
// leads to this machine is refused at dial time however it resolved
// before (DNS rebinding); opening the address lets it through.
func TestDialerChecksWhatItConnects(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	closed := netguard.Guard{Key: "agentd.test.allow"}.Dialer(5 * time.Second)
	for _, addr := range []string{"127.0.0.1:" + port, "localhost:" + port} {
		c, err := closed.DialContext(t.Context(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected", addr)
		}
		if !errors.Is(err, netguard.ErrRefused) || !strings.Contains(netguard.AsRefusal(err).Error(), "on this machine") {
			t.Errorf("%s: %v, want a refusal", addr, err)
		}
	}
	opened := netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Dialer(5 * time.Second)
	c, err := opened.DialContext(t.Context(), "tcp4", "localhost:"+port)
	if err != nil {
		t.Fatalf("an opened address: %v", err)
	}
	c.Close()
	<-accepted
	select {
	case <-accepted:
		t.Error("a refused dial reached the listener")
	default:
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	got, err := netguard.ParseAllow("k", []string{"127.0.0.1", "10.1.2.3/16", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "10.1.0.0/16", "::1/128"}
	for i, p := range got {
		if p.String() != want[i] {
			t.Errorf("%d: %s, want %s", i, p, want[i])
		}
	}
	if _, err := netguard.ParseAllow("agentd.x.allow", []string{"intranet"}); err == nil || !strings.Contains(err.Error(), "agentd.x.allow") {
		t.Errorf("a name: %v", err)
	}
}
