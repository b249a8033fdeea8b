package bench

import (
	"bytes"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/internal/pgtest"
)

func TestMarkdown(t *testing.T) {
	t.Parallel()
	var r result
	r.add("submits/s", "100", "pgbench 200", "0.50 × pgbench")
	r.add("peak RSS", "50 MB", "", "")
	require.Equal(t, "Measured today.\n"+
		"\n| measure | Agent-Reach | baseline | ratio |\n|---|---|---|---|\n"+
		"| submits/s | 100 | pgbench 200 | 0.50 × pgbench |\n"+
		"| peak RSS | 50 MB |  |  |\n", r.markdown("Measured today.\n"))
}

func TestFigures(t *testing.T) {
	t.Parallel()
	require.Equal(t, "n/a", fmtRate(0))
	require.Equal(t, "1235", fmtRate(1234.6))

	lat := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}
	require.InDelta(t, 3.0, ms(lat, 0.50), 1e-9)
	require.InDelta(t, 4.0, ms(lat, 0.99), 1e-9, "the top quantile is the largest")
	require.Zero(t, ms(nil, 0.5))

	tps, err := parseTPS([]byte("latency average = 1.2 ms\ntps = 6543.21 (without initial connection time)\n"))
	require.NoError(t, err)
	require.InDelta(t, 6543.21, tps, 1e-9)
	_, err = parseTPS([]byte("FATAL: no such database"))
	require.ErrorContains(t, err, "no tps in pgbench output: FATAL")

	require.InDelta(t, 100.0, parseVmHWM([]byte("VmPeak:\t 999 kB\nVmHWM:\t  102400 kB\n")), 1e-9)
	require.Zero(t, parseVmHWM([]byte("nothing")))

	require.Equal(t, "AMD EPYC 7B13", cpuModel([]byte("processor\t: 0\nmodel name\t: AMD EPYC 7B13  \n"), "linux/amd64"))
	require.Equal(t, "linux/amd64", cpuModel(nil, "linux/amd64"))
}

func TestProcCPU(t *testing.T) {
	t.Parallel()
	stat := "4242 (postgres: x (y) idle) S 1 2 3 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 99 1000 10"
	require.Equal(t, 3250*time.Millisecond, procCPU([]byte(stat)))
	require.Zero(t, procCPU([]byte("nonsense")))
	before := cpuUse{self: time.Second, backends: map[int]time.Duration{1: time.Second}}
	after := cpuUse{self: 3 * time.Second, backends: map[int]time.Duration{1: 2 * time.Second, 2: 500 * time.Millisecond}}
	self, db := after.since(before)
	require.Equal(t, 2*time.Second, self)
	require.Equal(t, 1500*time.Millisecond, db, "a backend that connected since counts whole")
}

func TestFirstDeliveries(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	submitted := map[string]eventstore.Record{"job:a": {RecordedAt: t0}, "job:b": {RecordedAt: t0}, "job:c": {RecordedAt: t0}}
	delivered := map[string]eventstore.Record{"job:a": {RecordedAt: t0.Add(5 * time.Millisecond)},
		"job:b": {RecordedAt: t0.Add(2 * time.Millisecond)}, "job:x": {RecordedAt: t0}}
	require.Equal(t, []time.Duration{2 * time.Millisecond, 5 * time.Millisecond}, firstDeliveries(submitted, delivered))
}

func TestWriteChart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bench.png")
	require.NoError(t, writeChart(path, "title", []chartBar{{label: "ours", value: 10}, {label: "River", value: 100, base: true}, {label: "none", value: 0}}))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, 900, img.Bounds().Dx())
	require.Equal(t, 44+34*3+20, img.Bounds().Dy())
	require.Error(t, writeChart(filepath.Join(t.TempDir(), "no", "such", "dir.png"), "t", nil))
}

func TestRouting(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("100,000 routing decisions")
	}
	p50, p99 := benchRouting()
	require.Positive(t, p50)
	require.LessOrEqual(t, p50, p99)
}

func TestInlineAgent(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	inlineAgent(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Empty(t, rec.Body.String(), "a probe")
	rec = httptest.NewRecorder()
	inlineAgent(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte(`{"job_id":"j"}`))))
	require.JSONEq(t, `{"status":"SUCCESS","result":{"ok":true}}`, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
}

func TestBenchSubmits(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	var status atomic.Int64
	status.Store(http.StatusAccepted)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(api.Close)
	rate, lat, err := benchSubmits(t.Context(), api.URL, 4, 50*time.Millisecond)
	require.NoError(t, err)
	require.Positive(t, rate)
	require.Len(t, lat, int(n.Load()))
	require.IsNonDecreasing(t, lat)

	// A refusal (the queue limit) is counted and waited out, never fatal.
	refusedSubmits.Store(0)
	status.Store(http.StatusTooManyRequests)
	rate, lat, err = benchSubmits(t.Context(), api.URL, 2, 200*time.Millisecond)
	require.NoError(t, err)
	require.Zero(t, rate)
	require.Empty(t, lat)
	require.Positive(t, refusedSubmits.Load())

	status.Store(http.StatusBadRequest)
	_, _, err = benchSubmits(t.Context(), api.URL, 2, 50*time.Millisecond)
	require.EqualError(t, err, "submit answered 400")
}

func TestCPUProfile(t *testing.T) {
	// Not parallel: one CPU profile per process at a time.
	stop, err := startCPUProfile("")
	require.NoError(t, err)
	stop()
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err = startCPUProfile(path)
	require.NoError(t, err)
	stop()
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Positive(t, info.Size())
}

func TestProfiles(t *testing.T) {
	// Not parallel: one CPU profile per process at a time.
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "cpu"), filepath.Join(dir, "mutex"), filepath.Join(dir, "block"), filepath.Join(dir, "allocs")}
	stop, err := startProfiles(paths[0], paths[1], paths[2], paths[3])
	require.NoError(t, err)
	require.NoError(t, stop())
	for _, p := range paths {
		info, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, info.Size(), p)
	}
	stop, err = startProfiles("", "", "", "")
	require.NoError(t, err)
	require.NoError(t, stop())
}

// The open loop offers its jobs at their times, not as fast as it can,
// and waits for their callbacks.
func TestBenchOpenLoop(t *testing.T) {
	t.Parallel()
	var acked, n atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"job_id":"j`+strconv.FormatInt(n.Add(1), 10)+`"}`)
		acked.Add(1)
	}))
	t.Cleanup(api.Close)
	start := time.Now()
	ids, err := benchOpenLoop(t.Context(), api.URL, "http://cb", "bench.echo", 200, 100*time.Millisecond, &acked)
	require.NoError(t, err)
	require.Len(t, ids, 20)
	require.GreaterOrEqual(t, time.Since(start), 95*time.Millisecond, "the 20th job is offered at 95 ms")
	require.NotContains(t, ids, "")
}

// The River baseline works every job it inserted, on a migrated database.
func TestBenchRiver(t *testing.T) {
	t.Parallel()
	rate, err := benchRiver(t.Context(), pgtest.NewDatabase(t), 500)
	require.NoError(t, err)
	require.Positive(t, rate)
}

func TestFlags(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: io.Discard, Getenv: func(k string) string { return map[string]string{"DATABASE_URL": "postgres://x"}[k] }}
	o, err := parseFlags(env, []string{"--jobs", "10", "--png", "b.png"})
	require.NoError(t, err)
	require.Equal(t, options{databaseURL: "postgres://x", duration: 5 * time.Second, jobs: 10, chart: "b.png", openFor: 10 * time.Second, satFor: 20 * time.Second,
		soakRate: 100, soakKeep: 2 * time.Minute, soakEvery: 30 * time.Second}, o)
	require.True(t, o.runs("e2e"), "no --only runs everything")
	o, err = parseFlags(env, []string{"--only", "e2e, open", "--rate", "100"})
	require.NoError(t, err)
	require.True(t, o.runs("open"))
	require.False(t, o.runs("submits"))
	require.InDelta(t, 100.0, o.rate, 1e-9)
	_, err = parseFlags(env, []string{"--only", "e2e,nope"})
	require.ErrorIs(t, err, cli.ErrUsage)
	for _, bad := range [][]string{{"--soak", "1m", "--only", "e2e"}, {"--soak", "1m", "--soak-retention", "30s"}, {"--soak", "1m", "--soak-rate", "0"}, {"--soak", "2h"}} {
		_, err = parseFlags(env, bad)
		require.ErrorIs(t, err, cli.ErrUsage, "%v", bad)
	}
	_, err = parseFlags(env, []string{"-h"})
	require.Error(t, err)
	require.Contains(t, out.String(), "agentreach bench: measure Agent-Reach against the limits of this machine")
	require.Contains(t, out.String(), "-cpuprofile")
	require.Contains(t, out.String(), "-mutexprofile")
}
