package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrForbiddenAddress reports a target that resolved to an address the
// sender's policy refuses (link-local, cloud metadata, and with
// Config.DenyPrivate also loopback and private ranges).
var ErrForbiddenAddress = errors.New("webhook: forbidden target address")

// Resolver looks up the addresses of a host. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// alwaysDenied are refused unless Config.Allow covers them: link-local (which
// holds 169.254.169.254, the AWS/GCP/Azure metadata service) and the other
// clouds' metadata addresses.
var alwaysDenied = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
}

// privateDenied are refused too when Config.DenyPrivate is set.
var privateDenied = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
}

// nat64 embeds an IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// addrPolicy decides which resolved addresses a push may connect to.
type addrPolicy struct {
	allow       []netip.Prefix
	denyPrivate bool
}

// check returns nil when a may be connected to, else an error wrapping
// ErrForbiddenAddress.
func (p addrPolicy) check(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	for _, pre := range p.allow {
		if pre.Contains(a) {
			return nil
		}
	}
	if nat64.Contains(a) {
		b := a.As16()
		if err := p.check(netip.AddrFrom4([4]byte(b[12:]))); err != nil {
			return err
		}
	}
	if reason := p.deniedBy(a); reason != "" {
		return fmt.Errorf("%w: %s is %s", ErrForbiddenAddress, a, reason)
	}
	return nil
}

// deniedBy names the denied range holding a, or returns "".
func (p addrPolicy) deniedBy(a netip.Addr) string {
	for _, d := range alwaysDenied {
		if d.prefix.Contains(a) {
			return d.reason
		}
	}
	if !p.denyPrivate {
		return ""
	}
	for _, d := range privateDenied {
		if d.prefix.Contains(a) {
			return d.reason
		}
	}
	return ""
}

// control runs as net.Dialer.Control, after the name is resolved and just
// before connect(2): the address checked is the one connected to, so a DNS
// answer that changes after an earlier check cannot slip through.
func (p addrPolicy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable %q", ErrForbiddenAddress, address)
	}
	return p.check(ap.Addr())
}

// guardedDialer resolves with its resolver and connects through a dialer whose
// Control hook enforces the policy on every address tried.
type guardedDialer struct {
	resolver Resolver
	dialer   *net.Dialer
}

// DialContext resolves addr's host and connects to the first permitted
// address that answers.
func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		conn, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), portText))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// lookup returns the literal address or resolves host.
func (d *guardedDialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := d.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	return addrs, nil
}
