package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies
// it; tests substitute a fake so no real DNS is needed.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL validates a user-supplied URL at registration/submission time.
//
// The URL must be absolute http or https with a host. An IP-literal host is
// checked directly. A host written in a legacy numeric IPv4 form
// ("2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "127.1") is decoded
// the way inet_aton would and checked, because some resolvers and HTTP
// stacks treat such names as addresses; if that address is allowed the host
// is still resolved as a name below, since the pure-Go resolver treats it
// as one. Any other host is resolved with r (net.DefaultResolver when r is
// nil) and every returned address must pass: one denied address is enough
// to refuse, since the dialer may pick any of them.
//
// Denials wrap ErrDenied. A resolution failure is returned wrapping the
// resolver's error and does not wrap ErrDenied, so callers can answer
// "cannot resolve" rather than "forbidden". Passing CheckURL does not make
// later connections safe on its own: DNS can change, so the dialer must also
// use [Policy.Control] or [Policy.DialContext].
func (p Policy) CheckURL(ctx context.Context, r Resolver, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("netguard: invalid URL: %w", err)
	}
	// url.Parse lower-cases the scheme, so no case folding is needed.
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("netguard: URL scheme %q not allowed: only http and https are", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("netguard: URL has no host")
	}

	// A single trailing dot marks a fully qualified name; some resolvers
	// still read "169.254.169.254." as an address, so literals are
	// recognised with it removed.
	literal := strings.TrimSuffix(host, ".")
	if ip, err := netip.ParseAddr(literal); err == nil {
		return withHost(p.CheckAddr(ip), host)
	}
	if ip, ok := parseLegacyIPv4(literal); ok {
		if err := p.CheckAddr(ip); err != nil {
			return withHost(err, host)
		}
	}

	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("netguard: cannot resolve host %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("netguard: cannot resolve host %q: no addresses", host)
	}
	for _, ip := range addrs {
		if err := p.CheckAddr(ip); err != nil {
			return withHost(err, host)
		}
	}
	return nil
}

// withHost records the URL's host in a DeniedError so the message says which
// name led to the address; other errors pass through unchanged.
func withHost(err error, host string) error {
	var de *DeniedError
	if errors.As(err, &de) {
		de.Host = host
	}
	return err
}

// parseLegacyIPv4 decodes the historical inet_aton notations that
// netip.ParseAddr rejects: one to four dot-separated parts, each decimal,
// octal (leading 0) or hexadecimal (0x prefix), where the last part fills all
// remaining bytes ("127.1" is 127.0.0.1, "2852039166" is 169.254.169.254).
// It errs on the side of recognising input as an address, since recognition
// only ever leads to an extra check.
func parseLegacyIPv4(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		v, ok := parseLegacyPart(part)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	// Every part but the last is a single byte; the last covers the
	// remaining 5-len(parts) bytes.
	last := len(vals) - 1
	for _, v := range vals[:last] {
		if v > 0xff {
			return netip.Addr{}, false
		}
	}
	restBits := uint(8 * (4 - last))
	if vals[last] >= 1<<restBits {
		return netip.Addr{}, false
	}
	var n uint64
	for _, v := range vals[:last] {
		n = n<<8 | v
	}
	n = n<<restBits | vals[last]
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// parseLegacyPart parses one inet_aton component. Values are capped just
// above 32 bits so long runs of digits cannot overflow; any value that big is
// out of range for every position anyway.
func parseLegacyPart(s string) (uint64, bool) {
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		// A bare "0x" is zero for inet_aton and the WHATWG URL parser.
		base, s = 16, s[2:]
		if s == "" {
			return 0, true
		}
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	case s == "":
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d, ok := digitValue(s[i])
		if !ok || d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 1<<32 {
			v = 1 << 32
		}
	}
	return v, true
}

// digitValue returns the numeric value of a decimal or hexadecimal digit.
func digitValue(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}
