// Package netguard decides which addresses agentd's outgoing HTTP may
// reach: the webfetch tool's fetches and the webhooks' deliveries. The
// check is made where the connection is made — the dialer's Control hook
// sees the address each connection is about to use, after DNS and on
// every redirect — so neither a name that resolves to 127.0.0.1, nor a
// DNS answer that changes between a check and the use, nor a redirect
// through a public host reaches what the operator did not open.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrRefused marks a connection refused by the address check.
var ErrRefused = errors.New("address refused")

// Guard refuses addresses on this machine (loopback), on private networks
// (RFC 1918, RFC 4193, carrier-grade NAT), link-local ones (cloud
// metadata at 169.254.169.254) and non-unicast ones, unless Allow holds
// them.
type Guard struct {
	// Allow lists the otherwise refused networks the operator opened.
	Allow []netip.Prefix
	// Key names the setting that opens them, for the refusal's message
	// ("agentd.webfetch.allow").
	Key string
}

// Refusal says why an address was refused; errors.Is(err, ErrRefused)
// holds for it.
type Refusal struct {
	Addr netip.Addr
	Key  string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s is on this machine or a private network; the operator's %s must list it", r.Addr, r.Key)
}

// Unwrap makes a Refusal an ErrRefused.
func (r *Refusal) Unwrap() error { return ErrRefused }

// AsRefusal returns the Refusal inside err (a dial error wraps it
// several times), or err itself when there is none.
func AsRefusal(err error) error {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return err
}

// Check refuses an "ip:port" address a connection must not reach unless
// allowed.
func (g Guard) Check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("address %q: %w", address, err)
	}
	return g.CheckAddr(ap.Addr())
}

// CheckAddr is Check for an address without a port.
func (g Guard) CheckAddr(addr netip.Addr) error {
	ip := addr.Unmap()
	for _, p := range g.Allow {
		if p.Contains(ip) {
			return nil
		}
	}
	if !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || sharedAddressSpace.Contains(ip) {
		return &Refusal{Addr: ip, Key: g.Key}
	}
	return nil
}

// sharedAddressSpace is carrier-grade NAT (RFC 6598), private in practice.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// Dialer returns a dialer whose every connection is checked. Use it with
// a transport that takes no proxy from the environment: the address
// checked must be the one connected to.
func (g Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
		return g.Check(address)
	}}
}

// ParseAllow reads an allow list of addresses or CIDR prefixes ("127.0.0.1",
// "10.1.0.0/16"); key names the setting in the error.
func ParseAllow(key string, allow []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, a := range allow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ip, ierr := netip.ParseAddr(a)
			if ierr != nil {
				return nil, fmt.Errorf("%s %q: want an address or a CIDR prefix", key, a)
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
