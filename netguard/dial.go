package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Control checks the address of a connection about to be made; its signature
// matches net.Dialer.Control. address is the "ip:port" the socket will
// connect to, after name resolution, which is why this check defeats DNS
// rebinding where CheckURL alone cannot. Anything that is not an IP and port
// (for example a Unix socket path) is refused, so the guard fails closed.
// A denial is returned as a *DeniedError wrapping ErrDenied; net wraps it in
// a *net.OpError, which still matches errors.Is(err, ErrDenied).
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("netguard: %s dial to %q: cannot check address: %w", network, address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("netguard: %s dial to %q: cannot check address: %w", network, address, err)
	}
	return p.CheckAddr(ip)
}

// DialContext returns a dial function for http.Transport.DialContext that
// dials with a copy of d whose Control hook first applies p and then any
// hook d already had. d itself is not modified and later changes to it are
// not seen. A nil d means a zero net.Dialer.
//
// The guard only covers connections this function makes: if the transport
// also has a Proxy, the proxy connects to the real destination unchecked,
// so guarded transports should set Proxy to nil.
func (p Policy) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var dd net.Dialer
	if d != nil {
		dd = *d
	}
	// net.Dialer ignores Control when ControlContext is set, so chain onto
	// whichever hook is actually in effect.
	if prev := dd.ControlContext; prev != nil {
		dd.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
			if err := p.Control(network, address, c); err != nil {
				return err
			}
			return prev(ctx, network, address, c)
		}
	} else {
		prev := dd.Control
		dd.Control = func(network, address string, c syscall.RawConn) error {
			if err := p.Control(network, address, c); err != nil {
				return err
			}
			if prev != nil {
				return prev(network, address, c)
			}
			return nil
		}
	}
	return dd.DialContext
}
