package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
)

// ErrDenied is wrapped by every error that reports a destination refused by
// the policy, so callers can tell "forbidden destination" apart from
// "malformed URL" or "cannot resolve" with errors.Is.
var ErrDenied = errors.New("netguard: destination address denied by network policy")

// AllowEnv is the environment variable the service reads its extra allow list
// from. It lives here only so the denial message can tell operators which
// knob to turn; this package never reads the environment itself.
const AllowEnv = "AGENTREACH_ALLOW_NETS"

// defaultDeny lists the networks denied out of the box, with the reason that
// is shown in denial messages. Private and loopback ranges are deliberately
// absent: internal agents live there.
var defaultDeny = []struct {
	prefix netip.Prefix
	reason string
}{
	// Covers 169.254.169.254, the metadata endpoint of AWS, GCP, Azure,
	// OpenStack and others.
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local / cloud metadata"},
	{netip.MustParsePrefix("fe80::/10"), "IPv6 link-local"},
	// AWS's IPv6 metadata endpoint sits inside fc00::/7, which is allowed
	// as private, so it needs its own entry.
	{netip.MustParsePrefix("fd00:ec2::254/128"), "AWS IPv6 cloud metadata"},
	// Alibaba Cloud's metadata endpoint sits in the CGNAT range, which is
	// otherwise left alone.
	{netip.MustParsePrefix("100.100.100.200/32"), "Alibaba Cloud metadata"},
	// Connecting to 0.0.0.0 or :: reaches the local host on Linux, which
	// would sidestep a loopback deny entry.
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified / this network"},
	{netip.MustParsePrefix("::/128"), "IPv6 unspecified"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "IPv6 multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "limited broadcast"},
}

// Policy decides which destination addresses may be dialled.
//
// An address is refused when it lies in any Deny prefix and in no Allow
// prefix: Allow wins, so an operator can carve a hole (for example one
// metadata-like internal endpoint) without rewriting the defaults. The zero
// Policy denies nothing; use [DefaultPolicy] or [ParsePolicy].
//
// Prefixes are matched against unmapped, zone-less addresses, so entries
// should be plain IPv4 or IPv6 prefixes; [ParsePolicy] normalises
// IPv4-mapped IPv6 entries for you.
type Policy struct {
	// Deny lists the networks that may not be dialled.
	Deny []netip.Prefix
	// Allow lists exceptions to Deny.
	Allow []netip.Prefix
}

// DefaultPolicy returns the built-in policy: link-local (including cloud
// metadata), well-known metadata addresses, unspecified, multicast and
// limited broadcast are denied; everything else, including private and
// loopback networks, is allowed. Each call returns fresh slices, so callers
// may append to them freely.
func DefaultPolicy() Policy {
	deny := make([]netip.Prefix, 0, len(defaultDeny))
	for _, d := range defaultDeny {
		deny = append(deny, d.prefix)
	}
	return Policy{Deny: deny}
}

// ParsePolicy builds a policy from operator configuration (typically
// AGENTREACH_DENY_NETS and AGENTREACH_ALLOW_NETS). Both strings are lists of
// CIDR prefixes separated by commas and/or whitespace; a bare IP stands for a
// single host (/32 or /128). Deny entries are added to the default deny
// list and allow entries become exceptions; the defaults can be lifted only
// through allow entries, never dropped, so a typo cannot silently re-open
// the metadata endpoint. Every bad entry is reported by name.
func ParsePolicy(deny, allow string) (Policy, error) {
	p := DefaultPolicy()
	extraDeny, errDeny := parsePrefixList("deny", deny)
	extraAllow, errAllow := parsePrefixList("allow", allow)
	if err := errors.Join(errDeny, errAllow); err != nil {
		return Policy{}, err
	}
	p.Deny = append(p.Deny, extraDeny...)
	p.Allow = append(p.Allow, extraAllow...)
	return p, nil
}

// parsePrefixList parses one comma/space separated list; kind names the list
// in error messages.
func parsePrefixList(kind, s string) ([]netip.Prefix, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || unicode.IsSpace(r)
	})
	var (
		out  []netip.Prefix
		errs []error
	)
	for _, f := range fields {
		pfx, err := parsePrefix(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("netguard: invalid %s entry %q: %w", kind, f, err))
			continue
		}
		out = append(out, pfx)
	}
	return out, errors.Join(errs...)
}

// parsePrefix accepts "addr/bits" or a bare address and returns a masked
// prefix in the same form CheckAddr compares against.
func parsePrefix(s string) (netip.Prefix, error) {
	var pfx netip.Prefix
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		pfx = p
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			// A zone names an interface, not a network; accepting it
			// would suggest the entry is interface-specific when it
			// is not.
			return netip.Prefix{}, errors.New("IPv6 zone not allowed")
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	// CheckAddr unmaps addresses before matching, so an IPv4-mapped entry
	// such as ::ffff:10.0.0.0/104 would never match anything unless it is
	// turned into the equivalent IPv4 prefix.
	if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
		pfx = netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
	}
	return pfx.Masked(), nil
}

// CheckAddr reports whether ip may be dialled. IPv4-mapped IPv6 addresses
// are unmapped and zones dropped first, because ::ffff:169.254.169.254 and
// fe80::1%eth0 reach the same hosts as their plain forms. A denied address
// yields a *DeniedError wrapping ErrDenied; an invalid address yields a
// plain error, so a zero netip.Addr never counts as allowed.
func (p Policy) CheckAddr(ip netip.Addr) error {
	if !ip.IsValid() {
		return errors.New("netguard: invalid IP address")
	}
	ip = ip.Unmap().WithZone("")
	if v4, ok := embeddedIPv4(ip); ok {
		// The IPv6 forms that carry an IPv4 address to a gateway reach
		// that address: it is checked as itself too.
		if err := p.CheckAddr(v4); err != nil {
			var d *DeniedError
			if errors.As(err, &d) {
				d.Addr = ip
			}
			return err
		}
	}
	for _, a := range p.Allow {
		if a.Contains(ip) {
			return nil
		}
	}
	for _, d := range p.Deny {
		if d.Contains(ip) {
			return &DeniedError{Addr: ip, Prefix: d}
		}
	}
	return nil
}

// IPv6 prefixes whose addresses embed an IPv4 address.
var (
	nat64        = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052 well-known prefix
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215 local-use
	ipv4Compat   = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible (::a.b.c.d)
	sixToFour    = netip.MustParsePrefix("2002::/16")      // RFC 3056: 2002:AABB:CCDD::
	teredo       = netip.MustParsePrefix("2001::/32")      // RFC 4380: the client's address, inverted
	loopbackV6   = netip.IPv6Loopback()
	unspecified6 = netip.IPv6Unspecified()
)

// embeddedIPv4 returns the IPv4 address that an IPv6 address of the NAT64,
// IPv4-compatible, 6to4 or Teredo forms carries.
func embeddedIPv4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() || ip == loopbackV6 || ip == unspecified6 {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip), nat64Local.Contains(ip), ipv4Compat.Contains(ip):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	case teredo.Contains(ip):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// String lists the deny and allow prefixes in a compact form for logs, e.g.
// "deny=[169.254.0.0/16 fe80::/10] allow=[]".
func (p Policy) String() string {
	var b strings.Builder
	writeList := func(name string, ps []netip.Prefix) {
		b.WriteString(name)
		b.WriteString("=[")
		for i, pfx := range ps {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(pfx.String())
		}
		b.WriteByte(']')
	}
	writeList("deny", p.Deny)
	b.WriteByte(' ')
	writeList("allow", p.Allow)
	return b.String()
}

// DeniedError describes a refused destination. It wraps ErrDenied.
type DeniedError struct {
	// Host is the host name or literal from the URL being checked; empty
	// when only an address was known (CheckAddr, connect-time checks).
	Host string
	// Addr is the offending address, unmapped and without zone.
	Addr netip.Addr
	// Prefix is the deny entry that matched.
	Prefix netip.Prefix
}

// Error explains what was denied, why, and how an operator can permit it,
// because the message typically ends up in front of whoever registered the
// URL or runs the service.
func (e *DeniedError) Error() string {
	var b strings.Builder
	b.WriteString("address ")
	b.WriteString(e.Addr.String())
	if e.Host != "" && e.Host != e.Addr.String() {
		fmt.Fprintf(&b, " of %q", e.Host)
	}
	b.WriteString(" is in denied network ")
	b.WriteString(e.Prefix.String())
	fmt.Fprintf(&b, " (%s); set %s to allow it", prefixReason(e.Prefix), AllowEnv)
	return b.String()
}

// Unwrap lets errors.Is(err, ErrDenied) match.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// prefixReason names why a prefix is denied: the built-in reason for a
// default entry, otherwise it must have come from operator configuration.
func prefixReason(pfx netip.Prefix) string {
	for _, d := range defaultDeny {
		if d.prefix == pfx {
			return d.reason
		}
	}
	return "configured deny list"
}
