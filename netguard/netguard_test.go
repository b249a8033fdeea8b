package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/netguard"
)

func TestCheckAddrDefaultPolicy(t *testing.T) {
	t.Parallel()

	tests := []struct {
		addr   string
		denied bool
		prefix string // expected matching deny prefix when denied
	}{
		{"169.254.169.254", true, "169.254.0.0/16"},
		{"::ffff:169.254.169.254", true, "169.254.0.0/16"},
		{"::ffff:a9fe:a9fe", true, "169.254.0.0/16"},
		{"fd00:ec2::254", true, "fd00:ec2::254/128"},
		{"fe80::1%eth0", true, "fe80::/10"},
		{"fe80::1", true, "fe80::/10"},
		{"0.0.0.0", true, "0.0.0.0/8"},
		{"::", true, "::/128"},
		{"224.0.0.1", true, "224.0.0.0/4"},
		{"ff02::1", true, "ff00::/8"},
		{"255.255.255.255", true, "255.255.255.255/32"},
		{"100.100.100.200", true, "100.100.100.200/32"},
		{"::ffff:100.100.100.200", true, "100.100.100.200/32"},
		// IPv6 forms that carry an IPv4 address to a gateway.
		{"64:ff9b::a9fe:a9fe", true, "169.254.0.0/16"},   // NAT64
		{"64:ff9b:1::a9fe:a9fe", true, "169.254.0.0/16"}, // NAT64, local use
		{"::169.254.169.254", true, "169.254.0.0/16"},    // IPv4-compatible
		{"::a9fe:a9fe", true, "169.254.0.0/16"},
		{"2002:a9fe:a9fe::1", true, "169.254.0.0/16"},        // 6to4
		{"2001:0:1:2:3:4:5601:5601", true, "169.254.0.0/16"}, // Teredo (inverted)
		{"64:ff9b::808:808", false, ""},
		{"2002:808:808::1", false, ""},

		{"10.0.0.5", false, ""},
		{"172.16.0.1", false, ""},
		{"192.168.1.1", false, ""},
		{"127.0.0.1", false, ""},
		{"::ffff:127.0.0.1", false, ""},
		{"::1", false, ""},
		{"fc00::1", false, ""},
		{"fd00:ec2::253", false, ""},
		{"100.100.100.201", false, ""},
		{"8.8.8.8", false, ""},
		{"2001:4860:4860::8888", false, ""},
	}
	p := netguard.DefaultPolicy()
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			err := p.CheckAddr(netip.MustParseAddr(tt.addr))
			if !tt.denied {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, netguard.ErrDenied)
			var de *netguard.DeniedError
			require.ErrorAs(t, err, &de)
			require.Equal(t, netip.MustParsePrefix(tt.prefix), de.Prefix)
			// The reported address is the normalised one that matched.
			require.False(t, de.Addr.Is4In6())
			require.Empty(t, de.Addr.Zone())
		})
	}
}

func TestCheckAddrInvalid(t *testing.T) {
	t.Parallel()
	err := netguard.DefaultPolicy().CheckAddr(netip.Addr{})
	require.Error(t, err)
	require.NotErrorIs(t, err, netguard.ErrDenied)
}

func TestZeroPolicyDeniesNothing(t *testing.T) {
	t.Parallel()
	require.NoError(t, netguard.Policy{}.CheckAddr(netip.MustParseAddr("169.254.169.254")))
}

func TestDefaultPolicyReturnsFreshSlices(t *testing.T) {
	t.Parallel()
	a := netguard.DefaultPolicy()
	a.Deny[0] = netip.MustParsePrefix("192.0.2.0/24")
	b := netguard.DefaultPolicy()
	require.Error(t, b.CheckAddr(netip.MustParseAddr("169.254.169.254")))
}

func TestDeniedErrorMessage(t *testing.T) {
	t.Parallel()

	e := &netguard.DeniedError{
		Host:   "metadata.internal",
		Addr:   netip.MustParseAddr("169.254.169.254"),
		Prefix: netip.MustParsePrefix("169.254.0.0/16"),
	}
	require.Equal(t,
		`address 169.254.169.254 of "metadata.internal" is in denied network 169.254.0.0/16 (link-local / cloud metadata); set AGENTREACH_ALLOW_NETS to allow it`,
		e.Error())

	// No host, or a host that is the address itself, is not repeated.
	e.Host = ""
	require.Equal(t,
		`address 169.254.169.254 is in denied network 169.254.0.0/16 (link-local / cloud metadata); set AGENTREACH_ALLOW_NETS to allow it`,
		e.Error())
	e.Host = "169.254.169.254"
	require.NotContains(t, e.Error(), " of ")

	// Operator-configured entries are labelled as such.
	e.Prefix = netip.MustParsePrefix("10.0.0.0/8")
	e.Addr = netip.MustParseAddr("10.1.2.3")
	require.Contains(t, e.Error(), "(configured deny list)")
}

func TestParsePolicy(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		deny    string
		allow   string
		denied  []string
		allowed []string
	}{
		{
			name:    "empty is default",
			denied:  []string{"169.254.169.254", "fd00:ec2::254"},
			allowed: []string{"10.1.2.3", "127.0.0.1"},
		},
		{
			name:    "deny private v4",
			deny:    "10.0.0.0/8",
			denied:  []string{"10.1.2.3", "::ffff:10.1.2.3", "169.254.169.254"},
			allowed: []string{"172.16.0.1", "8.8.8.8"},
		},
		{
			name:    "allow wins over default deny",
			allow:   "169.254.169.254/32",
			denied:  []string{"169.254.169.253", "fe80::1"},
			allowed: []string{"169.254.169.254", "::ffff:169.254.169.254"},
		},
		{
			name:    "allow wins over configured deny",
			deny:    "10.0.0.0/8",
			allow:   "10.9.0.0/16",
			denied:  []string{"10.8.255.255"},
			allowed: []string{"10.9.1.1"},
		},
		{
			name:    "bare IPs and mixed separators",
			deny:    " 192.0.2.7,\t2001:db8::1  127.0.0.0/8 ,, ::1 ",
			allow:   "127.0.0.53",
			denied:  []string{"192.0.2.7", "2001:db8::1", "127.0.0.1", "::1"},
			allowed: []string{"192.0.2.8", "2001:db8::2", "127.0.0.53"},
		},
		{
			name:    "unmasked prefix",
			deny:    "10.1.2.3/8",
			denied:  []string{"10.200.0.1"},
			allowed: []string{"11.0.0.1"},
		},
		{
			name:    "IPv4-mapped entry applies to IPv4",
			deny:    "::ffff:10.0.0.0/104",
			denied:  []string{"10.0.0.1", "::ffff:10.0.0.1"},
			allowed: []string{"11.0.0.1"},
		},
		{
			name:    "deny private v6",
			deny:    "fc00::/7",
			denied:  []string{"fc00::1", "fd12:3456::1"},
			allowed: []string{"2001:4860:4860::8888"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := netguard.ParsePolicy(tt.deny, tt.allow)
			require.NoError(t, err)
			for _, a := range tt.denied {
				require.ErrorIs(t, p.CheckAddr(netip.MustParseAddr(a)), netguard.ErrDenied, a)
			}
			for _, a := range tt.allowed {
				require.NoError(t, p.CheckAddr(netip.MustParseAddr(a)), a)
			}
		})
	}
}

func TestParsePolicyEmptyEqualsDefault(t *testing.T) {
	t.Parallel()
	p, err := netguard.ParsePolicy("", "  ")
	require.NoError(t, err)
	require.Equal(t, netguard.DefaultPolicy(), p)
}

func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		deny  string
		allow string
		want  []string // substrings the error must contain
	}{
		{"garbage deny", "10.0.0.0/8,nonsense", "", []string{`deny entry "nonsense"`}},
		{"bad bits", "10.0.0.0/33", "", []string{`deny entry "10.0.0.0/33"`}},
		{"bad allow", "", "1.2.3", []string{`allow entry "1.2.3"`}},
		{"zone", "fe80::1%eth0", "", []string{`deny entry "fe80::1%eth0"`, "zone"}},
		{"all bad entries named", "x y", "z", []string{`"x"`, `"y"`, `allow entry "z"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := netguard.ParsePolicy(tt.deny, tt.allow)
			require.Error(t, err)
			require.NotErrorIs(t, err, netguard.ErrDenied)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestPolicyString(t *testing.T) {
	t.Parallel()
	p, err := netguard.ParsePolicy("10.0.0.0/8", "169.254.169.254")
	require.NoError(t, err)
	s := p.String()
	require.True(t, strings.HasPrefix(s, "deny=[169.254.0.0/16 fe80::/10 "), s)
	require.Contains(t, s, " 10.0.0.0/8] allow=[169.254.169.254/32]")
	require.Equal(t, "deny=[] allow=[]", netguard.Policy{}.String())
}

// fakeResolver maps host names to addresses and fails for anything else. It
// records lookups so tests can assert that literals are never resolved.
type fakeResolver struct {
	hosts map[string][]string
	calls chan string
}

var errNoSuchHost = errors.New("no such host")

func newFakeResolver(hosts map[string][]string) *fakeResolver {
	return &fakeResolver{hosts: hosts, calls: make(chan string, 100)}
}

func (f *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.calls <- host
	if network != "ip" {
		return nil, errors.New("unexpected network " + network)
	}
	addrs, ok := f.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: errNoSuchHost.Error(), Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func TestCheckURL(t *testing.T) {
	t.Parallel()

	hosts := map[string][]string{
		"metadata.example":  {"169.254.169.254"},
		"mixed.example":     {"8.8.8.8", "169.254.169.254"},
		"internal.example":  {"10.0.0.7"},
		"internal6.example": {"fd12::7"},
		"corp.example":      {"172.20.1.1", "192.168.7.7"},
		"local.example":     {"127.0.0.1", "::1"},
		"public.example":    {"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"mapped.example":    {"::ffff:169.254.169.254"},
		"aws6.example":      {"fd00:ec2::254"},
		"empty.example":     {},
	}
	deny10, err := netguard.ParsePolicy("10.0.0.0/8", "")
	require.NoError(t, err)
	def := netguard.DefaultPolicy()

	type outcome int
	const (
		ok outcome = iota
		denied
		failed // error that is not ErrDenied
	)
	tests := []struct {
		name     string
		policy   netguard.Policy
		url      string
		want     outcome
		resolves bool // whether the resolver must be consulted
	}{
		{"metadata literal", def, "http://169.254.169.254/latest/meta-data/", denied, false},
		{"metadata literal with port", def, "https://169.254.169.254:443/", denied, false},
		{"metadata trailing dot", def, "http://169.254.169.254./", denied, false},
		{"mapped v6 literal", def, "http://[::ffff:169.254.169.254]/", denied, false},
		{"mapped v6 hex literal", def, "http://[::ffff:a9fe:a9fe]/", denied, false},
		{"aws v6 literal", def, "http://[fd00:ec2::254]/latest", denied, false},
		{"link-local with zone", def, "http://[fe80::1%25eth0]:8080/", denied, false},
		{"unspecified", def, "http://0.0.0.0:8080/", denied, false},
		{"percent-encoded literal rejected by net/url", def, "http://%31%36%39.254.169.254/", failed, false},
		{"decimal integer", def, "http://2852039166/", denied, false},
		{"hex integer", def, "http://0xa9fea9fe/", denied, false},
		{"hex integer upper", def, "http://0XA9FEA9FE/", denied, false},
		{"octal dotted", def, "http://0251.0376.0251.0376/", denied, false},
		{"hex dotted", def, "http://0xa9.0xfe.0xa9.0xfe/", denied, false},
		{"two parts", def, "http://169.16689662/", denied, false},
		{"three parts", def, "http://169.254.43518/", denied, false},
		{"leading zero decimal-looking", def, "http://0169.0254.0169.0254/", failed, true}, // 9 is not octal: a name
		{"integer zero", def, "http://0/", denied, false},
		{"bare hex prefix is zero", def, "http://0x/", denied, false},
		{"long leading zeros", def, "http://000000000000000000000251.254.169.254/", denied, false},
		{"integer overflow is a name", def, "http://4294967296/", failed, true},
		{"byte overflow is a name", def, "http://256.1.1.1/", failed, true},
		{"five parts is a name", def, "http://1.2.3.4.5/", failed, true},
		{"empty part is a name", def, "http://169..254.1/", failed, true},
		{"legacy allowed form still resolved", def, "http://2130706433/", failed, true},

		{"name to metadata", def, "http://metadata.example/", denied, true},
		{"name to mixed", def, "http://mixed.example/", denied, true},
		{"name to mapped metadata", def, "http://mapped.example/", denied, true},
		{"name to aws v6 metadata", def, "http://aws6.example/", denied, true},
		{"internal allowed by default", def, "http://internal.example/", ok, true},
		{"internal denied by policy", deny10, "http://internal.example/", denied, true},
		{"internal v6 allowed", def, "http://internal6.example:9000/x", ok, true},
		{"corp private", def, "https://corp.example/hook", ok, true},
		{"corp private under deny10", deny10, "https://corp.example/hook", ok, true},
		{"loopback", def, "http://local.example:8080/health", ok, true},
		{"public", def, "https://public.example/", ok, true},
		{"private literal", def, "http://10.0.0.5:8080/", ok, false},
		{"private literal denied", deny10, "http://10.0.0.5:8080/", denied, false},
		{"public v6 literal", def, "http://[2001:4860:4860::8888]/", ok, false},

		{"unresolvable", def, "http://nope.example/", failed, true},
		{"resolves to nothing", def, "http://empty.example/", failed, true},
		{"ftp scheme", def, "ftp://public.example/", failed, false},
		{"file scheme", def, "file:///etc/passwd", failed, false},
		{"gopher scheme", def, "gopher://127.0.0.1:6379/_", failed, false},
		{"no scheme", def, "public.example/path", failed, false},
		{"no host", def, "http:///path", failed, false},
		{"unparsable", def, "http://[::1/", failed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newFakeResolver(hosts)
			err := tt.policy.CheckURL(context.Background(), r, tt.url)
			switch tt.want {
			case ok:
				require.NoError(t, err)
			case denied:
				require.ErrorIs(t, err, netguard.ErrDenied)
				var de *netguard.DeniedError
				require.ErrorAs(t, err, &de)
				require.NotEmpty(t, de.Host)
			case failed:
				require.Error(t, err)
				require.NotErrorIs(t, err, netguard.ErrDenied)
			}
			require.Equal(t, tt.resolves, len(r.calls) > 0, "resolver consulted")
		})
	}
}

func TestCheckURLResolverErrorIsWrapped(t *testing.T) {
	t.Parallel()
	err := netguard.DefaultPolicy().CheckURL(context.Background(), newFakeResolver(nil), "http://nope.example/")
	require.Error(t, err)
	require.NotErrorIs(t, err, netguard.ErrDenied)
	var dnsErr *net.DNSError
	require.ErrorAs(t, err, &dnsErr)
	require.True(t, dnsErr.IsNotFound)
	require.Contains(t, err.Error(), `cannot resolve host "nope.example"`)
}

func TestCheckURLDeniedMessageNamesHost(t *testing.T) {
	t.Parallel()
	r := newFakeResolver(map[string][]string{"metadata.internal": {"169.254.169.254"}})
	err := netguard.DefaultPolicy().CheckURL(context.Background(), r, "http://metadata.internal/")
	require.EqualError(t, err,
		`address 169.254.169.254 of "metadata.internal" is in denied network 169.254.0.0/16 (link-local / cloud metadata); set AGENTREACH_ALLOW_NETS to allow it`)

	err = netguard.DefaultPolicy().CheckURL(context.Background(), r, "http://0xa9fea9fe/")
	require.ErrorContains(t, err, `address 169.254.169.254 of "0xa9fea9fe"`)
}

func TestCheckURLAllowedMetadata(t *testing.T) {
	t.Parallel()
	p, err := netguard.ParsePolicy("", "169.254.169.254")
	require.NoError(t, err)
	require.NoError(t, p.CheckURL(context.Background(), newFakeResolver(nil), "http://169.254.169.254/"))
}

// listen starts a TCP listener on 127.0.0.1 that accepts and immediately
// closes connections, so dials complete regardless of backlog.
func listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestDialContext(t *testing.T) {
	t.Parallel()
	addr := listen(t)
	// ::1 is denied too so that "localhost" fails with ErrDenied whichever
	// family the dialer tries first.
	denyLoopback, err := netguard.ParsePolicy("127.0.0.0/8 ::1", "")
	require.NoError(t, err)
	allowBack, err := netguard.ParsePolicy("127.0.0.0/8", "127.0.0.1")
	require.NoError(t, err)

	tests := []struct {
		name   string
		policy netguard.Policy
		addr   string
		denied bool
	}{
		{"default allows loopback", netguard.DefaultPolicy(), addr, false},
		{"deny loopback", denyLoopback, addr, true},
		{"allow wins at dial time", allowBack, addr, false},
		// The name is resolved by the dialer; the check sees the
		// resulting IP, which is what defeats DNS rebinding.
		{"deny loopback via name", denyLoopback, strings.Replace(addr, "127.0.0.1", "localhost", 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dial := tt.policy.DialContext(&net.Dialer{})
			conn, err := dial(context.Background(), "tcp", tt.addr)
			if tt.denied {
				require.ErrorIs(t, err, netguard.ErrDenied)
				require.Nil(t, conn)
				return
			}
			require.NoError(t, err)
			require.NoError(t, conn.Close())
		})
	}
}

func TestDialContextChainsExistingControl(t *testing.T) {
	t.Parallel()
	addr := listen(t)
	denyLoopback, err := netguard.ParsePolicy("127.0.0.0/8", "")
	require.NoError(t, err)

	t.Run("Control", func(t *testing.T) {
		t.Parallel()
		called := 0
		errHook := errors.New("hook refused")
		d := &net.Dialer{Control: func(string, string, syscall.RawConn) error {
			called++
			return errHook
		}}
		// Allowed by the policy: the existing hook runs and its error
		// surfaces.
		_, err := netguard.DefaultPolicy().DialContext(d)(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, errHook)
		require.Equal(t, 1, called)
		// Denied by the policy: the guard runs first and the hook is
		// skipped.
		_, err = denyLoopback.DialContext(d)(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, netguard.ErrDenied)
		require.Equal(t, 1, called)
		require.NotNil(t, d.Control, "caller's dialer is left unchanged")
	})

	t.Run("ControlContext", func(t *testing.T) {
		t.Parallel()
		called := 0
		d := &net.Dialer{ControlContext: func(context.Context, string, string, syscall.RawConn) error {
			called++
			return nil
		}}
		conn, err := netguard.DefaultPolicy().DialContext(d)(context.Background(), "tcp", addr)
		require.NoError(t, err)
		require.NoError(t, conn.Close())
		require.Equal(t, 1, called)
		// ControlContext takes precedence over Control in net.Dialer,
		// so the guard must hook it rather than Control.
		_, err = denyLoopback.DialContext(d)(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, netguard.ErrDenied)
		require.Equal(t, 1, called)
		require.Nil(t, d.Control)
	})

	t.Run("nil dialer", func(t *testing.T) {
		t.Parallel()
		_, err := denyLoopback.DialContext(nil)(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, netguard.ErrDenied)
	})
}

func TestControl(t *testing.T) {
	t.Parallel()
	p := netguard.DefaultPolicy()

	tests := []struct {
		network, address string
		want             string // "ok", "denied" or "error"
	}{
		{"tcp4", "169.254.169.254:80", "denied"},
		{"tcp6", "[::ffff:169.254.169.254]:80", "denied"},
		{"tcp6", "[fe80::1%eth0]:80", "denied"},
		{"tcp6", "[fd00:ec2::254]:80", "denied"},
		{"tcp4", "10.0.0.1:443", "ok"},
		{"tcp6", "[::1]:443", "ok"},
		{"unix", "/var/run/docker.sock", "error"},
		{"tcp4", "example.com:80", "error"},
		{"tcp4", "", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.network+" "+tt.address, func(t *testing.T) {
			t.Parallel()
			err := p.Control(tt.network, tt.address, nil)
			switch tt.want {
			case "ok":
				require.NoError(t, err)
			case "denied":
				require.ErrorIs(t, err, netguard.ErrDenied)
			default:
				require.Error(t, err)
				require.NotErrorIs(t, err, netguard.ErrDenied)
			}
		})
	}
}

func TestHTTPClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	denyLoopback, err := netguard.ParsePolicy("127.0.0.0/8,::1", "")
	require.NoError(t, err)

	client := func(p netguard.Policy) *http.Client {
		tr := &http.Transport{
			// A proxy would make the connection on our behalf,
			// bypassing the guard.
			Proxy:       nil,
			DialContext: p.DialContext(&net.Dialer{}),
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}

	t.Run("allowed", func(t *testing.T) {
		t.Parallel()
		resp, err := client(netguard.DefaultPolicy()).Get(srv.URL)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		resp, err := client(denyLoopback).Get(srv.URL)
		if resp != nil {
			_ = resp.Body.Close()
		}
		require.ErrorIs(t, err, netguard.ErrDenied)
		require.Contains(t, err.Error(), "127.0.0.1")
	})

	t.Run("denied after redirect", func(t *testing.T) {
		t.Parallel()
		// Redirect from an allowed server to a denied one: the second
		// hop is a new dial and is checked again.
		denied := netguard.Policy{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.2:1/", http.StatusFound)
		}))
		t.Cleanup(redir.Close)
		resp, err := client(denied).Get(redir.URL)
		if resp != nil {
			_ = resp.Body.Close()
		}
		require.ErrorIs(t, err, netguard.ErrDenied)
	})
}
