package pgtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// CutProxy forwards PostgreSQL connections to the server and, once armed,
// cuts the first one that reaches a COMMIT: before the client's COMMIT
// reaches the server (it aborts), or after the server answered it (it
// committed) and before the client hears so. Either way the client sees
// its connection die during COMMIT.
type CutProxy struct {
	ln       net.Listener
	upstream string
	// armed: 1 cuts before the COMMIT reaches the server, 2 after it
	// committed; the cut disarms it.
	armed atomic.Int32
	cuts  atomic.Int32
	// readies counts the server's ReadyForQuery messages: one ends every
	// round trip a client makes.
	readies atomic.Int64
	wg      sync.WaitGroup
}

func NewCutProxy(t *testing.T, upstream string) *CutProxy {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &CutProxy{ln: ln, upstream: upstream}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *CutProxy) serve(client net.Conn) {
	defer func() { _ = client.Close() }()
	server, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", p.upstream)
	if err != nil {
		return
	}
	defer func() { _ = server.Close() }()
	cut := func() bool { // the first to find its COMMIT takes the cut
		if p.armed.Load() == 0 {
			return false
		}
		p.armed.Store(0)
		p.cuts.Add(1)
		_ = client.Close()
		_ = server.Close()
		return true
	}
	go func() { // client → server: cut before a COMMIT when armed so
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if p.armed.Load() == 1 && bytes.Contains(bytes.ToLower(buf[:n]), []byte("commit")) && cut() {
					return
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = server.Close()
				return
			}
		}
	}()
	// server → client, message by message: cut after the server's answer
	// to a COMMIT (CommandComplete "COMMIT") when armed so.
	var head [5]byte // sslmode=disable: no SSL request, messages from the first byte
	for {
		if _, err := io.ReadFull(server, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if head[0] == 'C' && bytes.HasPrefix(body, []byte("COMMIT")) && p.armed.Load() == 2 && cut() {
			return
		}
		if head[0] == 'Z' {
			p.readies.Add(1)
		}
		if _, err := client.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// Addr is the proxy's address, host:port, to connect to instead of the
// server's.
func (p *CutProxy) Addr() string { return p.ln.Addr().String() }

// Arm makes the proxy cut the next COMMIT: when 1 before it reaches the
// server (it aborts), when 2 after the server committed it.
func (p *CutProxy) Arm(when int32) { p.armed.Store(when) }

// RoundTrips is how many round trips the proxy's clients have made (the
// server's ReadyForQuery messages, connections' start-ups included).
func (p *CutProxy) RoundTrips() int64 { return p.readies.Load() }

// Cuts is how many connections the proxy has cut.
func (p *CutProxy) Cuts() int32 { return p.cuts.Load() }

// NewCountingPool is a pool of one connection to a database of its own
// (NewDatabase) through a proxy, never pinged before use (pgxpool pings a
// connection idle for a second): the proxy's RoundTrips are the pool's
// statements' alone.
func NewCountingPool(t *testing.T) (*pgxpool.Pool, *CutProxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabase(t))
	require.NoError(t, err)
	p := NewCutProxy(t, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = p.host(t)
	cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = nil, nil
	cfg.MaxConns = 1
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, p
}

// host is the proxy's address as a host and a port.
func (p *CutProxy) host(t *testing.T) (string, uint16) {
	t.Helper()
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), uint16(a.Port)
}
