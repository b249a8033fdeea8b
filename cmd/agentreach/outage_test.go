package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// switchProxy forwards 127.0.0.1 connections to PostgreSQL until cut: then
// it closes every connection and refuses new ones, until restored.
type switchProxy struct {
	t        *testing.T
	addr     string
	upstream string

	mu    sync.Mutex
	l     net.Listener
	conns []net.Conn
}

func newSwitchProxy(t *testing.T, upstream string) *switchProxy {
	t.Helper()
	p := &switchProxy{t: t, addr: deadAddr(t), upstream: upstream}
	p.restore()
	t.Cleanup(p.cut)
	return p
}

func (p *switchProxy) restore() {
	l, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *switchProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// A database outage is told in a few lines: the first error, a summary
// at most every ten seconds, one line when it is back; /readyz answers
// 503 during it and /metrics counts it.
func TestOutageIsLoggedInAFewLines(t *testing.T) {
	t.Parallel()
	dsn := newDatabase(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := newSwitchProxy(t, u.Host)
	u.Host = proxy.addr
	svc := startTuned(t, map[string]string{"DATABASE_URL": u.String()}, fastSweeps,
		"serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "info")
	base := svc.m.URL()
	waitReady(t, base)
	pool, err := pgxpool.New(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	leader := func() (elected time.Time, ok bool) {
		err := pool.QueryRow(t.Context(), `SELECT elected_at FROM river_leader WHERE expires_at > now()`).Scan(&elected)
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, false
		}
		require.NoError(t, err)
		return elected, true
	}
	// River started (the sweeps start after it) and elected its leader.
	deadline := time.Now().Add(30 * time.Second)
	for _, ok := leader(); !ok || !strings.Contains(svc.out.String(), "sweep leadership taken"); _, ok = leader() {
		require.True(t, time.Now().Before(deadline), "River elected no leader within 30 s")
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	before := strings.Count(svc.out.String(), "\n")

	proxy.cut()
	deadline = time.Now().Add(30 * time.Second)
	for !strings.Contains(svc.out.String(), "the database is still unreachable") {
		require.True(t, time.Now().Before(deadline), "no summary of the outage within 30 s:\n%s", svc.out.String())
		time.Sleep(100 * time.Millisecond) // poll interval while waiting on the condition
	}
	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "not ready while the database is out")
	var restored time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT now()`).Scan(&restored))
	proxy.restore()
	for !strings.Contains(svc.out.String(), "the database answers again") {
		require.True(t, time.Now().Before(deadline), "no line for the database's return within 30 s:\n%s", svc.out.String())
		time.Sleep(100 * time.Millisecond) // poll interval while waiting on the condition
	}
	waitReady(t, base)
	var during []string
	for _, line := range strings.Split(svc.out.String(), "\n")[before:] {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			during = append(during, line)
		}
	}
	t.Logf("the log during the outage:\n%s", strings.Join(during, "\n"))
	require.LessOrEqual(t, len(during), 12, "an outage of about ten seconds in a few lines, not one a failure:\n%s", strings.Join(during, "\n"))

	// River's leader is back soon, not after its election's back-off (up
	// to a minute): River is restarted once the database answers.
	deadline = time.Now().Add(10 * time.Second)
	for {
		if elected, ok := leader(); ok && elected.After(restored) {
			t.Logf("River's leader elected %s after the database came back", elected.Sub(restored).Round(time.Millisecond))
			break
		}
		require.True(t, time.Now().Before(deadline), "no River leader elected within 10 s of the database's return:\n%s", svc.out.String())
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	for !strings.Contains(svc.out.String(), "River restarted after the database came back") {
		require.True(t, time.Now().Before(deadline), "River not restarted within 10 s of the database's return:\n%s", svc.out.String())
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	code, metrics := call(t, http.MethodGet, base+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, "agentreach_database_outages_total 1")
	require.Contains(t, metrics, "agentreach_database_reachable 1")
}

// With --require-sync-standby, a primary without a synchronous standby
// streaming (this test's lone server) takes no writes: they answer 503
// with Retry-After before anything is written, reads go on, /readyz stays
// ready and says why writes are refused, and /metrics shows it. Without
// the flag, writes go.
func TestRequireSyncStandby(t *testing.T) {
	t.Parallel()
	svc := start(t, map[string]string{"DATABASE_URL": newDatabase(t)}, "serve", "--insecure", "--addr", "127.0.0.1:0",
		"--log-level", "warn", "--require-sync-standby")
	base := svc.m.URL()
	waitReady(t, base)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := call(t, http.MethodGet, base+"/readyz", "", "")
		require.Equal(t, http.StatusOK, code, "ready for reads: %s", body)
		if strings.Contains(body, `"replication"`) {
			require.Contains(t, body, `"writes":"refused"`)
			require.Contains(t, body, "synchronous_standby_names is empty")
			break
		}
		require.True(t, time.Now().Before(deadline), "the standbys not read within 20 s: %s", body)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	req, err := http.NewRequest(http.MethodPost, base+"/v1/jobs", strings.NewReader(`{"capability":"t.sync","payload":{}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"code":"unavailable"`)
	require.Contains(t, string(body), "--require-sync-standby")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	// An agent's report of work under way passes the refusal (this one
	// then fails on its missing token, not on the standby).
	code, body2 := call(t, http.MethodPut, base+"/v1/agents/a1/heartbeat", "", `{}`)
	require.Equal(t, http.StatusUnauthorized, code, body2)
	code, body2 = call(t, http.MethodGet, base+"/v1/jobs", "", "")
	require.Equal(t, http.StatusOK, code, body2)
	require.Contains(t, body2, `"jobs":[]`, "nothing was written")
	code, metrics := call(t, http.MethodGet, base+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, "agentreach_database_writes_refused 1")
	require.Contains(t, metrics, "agentreach_database_sync_standbys 0")
	require.Equal(t, 1, strings.Count(svc.out.String(), `msg="writes refused"`), "said once, not a request at a time:\n%s", svc.out.String())
	require.NotContains(t, svc.out.String(), "request failed")

	plain := start(t, map[string]string{"DATABASE_URL": newDatabase(t)}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	waitReady(t, plain.m.URL())
	submitOK(t, plain.m.URL(), `{"capability":"t.sync","payload":{}}`)
	code, metrics = call(t, http.MethodGet, plain.m.URL()+"/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, metrics, "agentreach_database_writes_refused 0")
}

// With --read-database-url, job lists, the agents' figures and alerts are
// read there, while one job, and every write, stay on the primary. Here
// the read database is another database holding no job, so a list read
// there shows none though the primary holds one.
func TestReadDatabase(t *testing.T) {
	t.Parallel()
	svc := start(t, map[string]string{"DATABASE_URL": newDatabase(t), "AGENTREACH_READ_DATABASE_URL": newDatabase(t)},
		"serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	id := submitOK(t, base, `{"capability":"t.read","payload":{}}`)
	require.Equal(t, id, getJob(t, base, id).JobID, "one job: the primary")
	code, body := call(t, http.MethodGet, base+"/v1/jobs", "", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"jobs":[]`, "the list: the read database")
	code, body = call(t, http.MethodGet, base+"/v1/metrics/agents", "", "")
	require.Equal(t, http.StatusOK, code, body)
	code, body = call(t, http.MethodGet, base+"/v1/alerts", "", "")
	require.Equal(t, http.StatusOK, code, body)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, metrics := call(t, http.MethodGet, base+"/metrics", "", "")
		require.Equal(t, http.StatusOK, code)
		if strings.Contains(metrics, "agentreach_database_read_lag_seconds 0") {
			break
		}
		require.True(t, time.Now().Before(deadline), "no read lag in /metrics within 20 s")
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
	code, body = call(t, http.MethodGet, base+"/readyz", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"read_database_lag_seconds":0`)
	require.NotContains(t, svc.out.String(), "postgres://", "no database URL in the log")
}
