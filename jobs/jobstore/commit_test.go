package jobstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// cutProxy forwards PostgreSQL connections to the server and, once armed,
// cuts the first one that reaches a COMMIT: before the client's COMMIT
// reaches the server (it aborts), or after the server answered it (it
// committed) and before the client hears so. Either way the client sees
// its connection die during COMMIT.
type cutProxy struct {
	ln       net.Listener
	upstream string
	// armed: 1 cuts before the COMMIT reaches the server, 2 after it
	// committed; the cut disarms it.
	armed atomic.Int32
	cuts  atomic.Int32
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, upstream: upstream}
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

func (p *cutProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer server.Close()
	cut := func() bool { // the first to find its COMMIT takes the cut
		if p.armed.Load() == 0 {
			return false
		}
		p.armed.Store(0)
		p.cuts.Add(1)
		client.Close()
		server.Close()
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
				server.Close()
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
		if _, err := client.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// TestCommitWhoseConnectionDies: when the connection dies during COMMIT,
// the unit of work asks PostgreSQL what became of the transaction rather
// than failing: one that committed is a success (its job written once),
// one that did not is run again on a new connection (written once too).
func TestCommitWhoseConnectionDies(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := New(pool, eventstore.New(pool), &queued{}, Config{LostAfter: 10e9, CallbackGrace: 45e9})

	for _, when := range []int32{2, 1} { // after the commit, then before it
		proxy.armed.Store(when)
		cutsBefore := proxy.cuts.Load()
		l := newJobOf(t, s, "doc:parse", domain.PriorityNormal) // a write that creates a job's stream
		require.Equal(t, cutsBefore+1, proxy.cuts.Load(), "the connection was cut during COMMIT (armed %d)", when)
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE stream_id = $1`, domain.JobStream(l.JobID)).Scan(&n))
		require.Equal(t, 1, n, "written once (armed %d)", when)
	}
}
