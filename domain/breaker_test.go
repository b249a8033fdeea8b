package domain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

var breakerT0 = time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC)

// bt is breakerT0 plus s seconds.
func bt(s float64) time.Time { return breakerT0.Add(time.Duration(s * float64(time.Second))) }

// samples builds one sample per second from start: 'x' fails, '.' succeeds.
func samples(start float64, pattern string) []domain.AttemptSample {
	out := make([]domain.AttemptSample, 0, len(pattern))
	for i, c := range pattern {
		out = append(out, domain.AttemptSample{At: bt(start + float64(i)), OK: c != 'x'})
	}
	return out
}

func TestEvaluateBreaker(t *testing.T) {
	t.Parallel()
	cfg := domain.DefaultBreakerConfig() // 60s window, 10 attempts, 25%, 30s cool-down
	// Ten attempts at t=0..9, the last three failing: 3/10 >= 25% at t=9.
	trip := samples(0, ".......xxx")
	// Ten attempts five seconds apart, the last three failing: trips at 45,
	// when the first of them is already 45s old.
	var slow []domain.AttemptSample
	for i := range 10 {
		slow = append(slow, domain.AttemptSample{At: bt(float64(5 * i)), OK: i < 7})
	}
	cases := []struct {
		name    string
		samples []domain.AttemptSample
		now     float64
		want    domain.BreakerStatus
	}{
		{
			name: "no samples", now: 100,
			want: domain.BreakerStatus{State: domain.BreakerClosed},
		},
		{
			name: "below min attempts stays closed even at 100% errors", samples: samples(0, "xxxxxxxxx"), now: 9,
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 1, Attempts: 9},
		},
		{
			name: "just below the error rate stays closed", samples: samples(0, "..........xxx"), now: 12,
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 3.0 / 13, Attempts: 13},
		},
		{
			name: "one more failure trips it", samples: samples(0, "..........xxxx"), now: 13,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 4.0 / 14, Attempts: 14, OpenedAt: bt(13), RetryAt: bt(43)},
		},
		{
			name: "opens at exactly 25%", samples: samples(0, "........x.xx"), now: 11,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 0.25, Attempts: 12, OpenedAt: bt(11), RetryAt: bt(41)},
		},
		{
			name: "opens at the first sample that reaches the rate", samples: samples(0, "......xx.x.x"), now: 12,
			// 3 of 10 at t=9; the samples at 10 and 11 came during the cool-down.
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 4.0 / 12, Attempts: 12, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "a sample exactly at now is in", samples: trip, now: 9,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 0.3, Attempts: 10, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "samples after now are ignored", samples: trip, now: 8.5,
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 2.0 / 9, Attempts: 9},
		},
		{
			name: "stays open during the cool-down", samples: trip, now: 38.999,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 0.3, Attempts: 10, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "half-open at exactly RetryAt", samples: trip, now: 39,
			want: domain.BreakerStatus{State: domain.BreakerHalfOpen, ErrorRate: 0.3, Attempts: 10, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "half-open waits for a probe after its failures left the window", samples: trip, now: 68,
			// The window (8, 68] holds only the failure at 9.
			want: domain.BreakerStatus{State: domain.BreakerHalfOpen, ErrorRate: 1, Attempts: 1, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "half-open waits for a probe however long it takes", samples: trip, now: 3600,
			want: domain.BreakerStatus{State: domain.BreakerHalfOpen, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "late results during the cool-down are ignored", samples: append(samples(0, ".......xxx"), samples(10, "..........")...), now: 20,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 0.15, Attempts: 20, OpenedAt: bt(9), RetryAt: bt(39)},
		},
		{
			name: "successful probe after RetryAt closes", samples: append(samples(0, ".......xxx"), samples(40, ".")...), now: 41,
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 3.0 / 11, Attempts: 11},
		},
		{
			name: "successful probe at exactly RetryAt closes", samples: append(samples(0, ".......xxx"), samples(39, ".")...), now: 39,
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 3.0 / 11, Attempts: 11},
		},
		{
			name: "after closing, old failures do not trip it again", samples: append(samples(0, "xxxxxxxxxx"), samples(40, ".xxxxxxxxx")...), now: 49,
			// The probe at 40 closed it; nine failures since: below MinAttempts.
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 19.0 / 20, Attempts: 20},
		},
		{
			name: "the tenth attempt since closing trips it again", samples: append(samples(0, "xxxxxxxxxx"), samples(40, ".xxxxxxxxxx")...), now: 50,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 20.0 / 21, Attempts: 21, OpenedAt: bt(50), RetryAt: bt(80)},
		},
		{
			name: "failed probe reopens with a new cool-down", samples: append(samples(0, ".......xxx"), samples(45, "x")...), now: 46,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 4.0 / 11, Attempts: 11, OpenedAt: bt(45), RetryAt: bt(75)},
		},
		{
			name: "reopened breaker stays open through its new cool-down", samples: append(samples(0, ".......xxx"), samples(45, "x")...), now: 74,
			// The window (14, 74] holds only the failed probe.
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 1, Attempts: 1, OpenedAt: bt(45), RetryAt: bt(75)},
		},
		{
			name: "reopened breaker is half-open after its new cool-down", samples: append(samples(0, ".......xxx"), samples(45, "x")...), now: 75,
			want: domain.BreakerStatus{State: domain.BreakerHalfOpen, ErrorRate: 1, Attempts: 1, OpenedAt: bt(45), RetryAt: bt(75)},
		},
		{
			name: "slow traffic: the cool-down holds after the evidence leaves the window", samples: slow, now: 61,
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 3.0 / 9, Attempts: 9, OpenedAt: bt(45), RetryAt: bt(75)},
		},
		{
			name: "samples outside the window are ignored", samples: append(samples(0, "xxxxx"), samples(61, ".........")...), now: 70,
			// No window of 60s ever holds ten attempts with a quarter failed.
			want: domain.BreakerStatus{State: domain.BreakerClosed, Attempts: 9},
		},
		{
			name: "a sample exactly Window before another is out of its window", samples: append(samples(9, "x"), samples(61, "xx.......")...), now: 70,
			// At t=69 the window (9, 69] holds nine attempts: below MinAttempts.
			want: domain.BreakerStatus{State: domain.BreakerClosed, ErrorRate: 2.0 / 9, Attempts: 9},
		},
		{
			name: "a sample just inside the window counts", samples: append(samples(9.5, "x"), samples(61, "xx.......")...), now: 70,
			// At t=69 the window (9, 69] holds ten attempts, three failed.
			want: domain.BreakerStatus{State: domain.BreakerOpen, ErrorRate: 2.0 / 9, Attempts: 9, OpenedAt: bt(69), RetryAt: bt(99)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := domain.EvaluateBreaker(tc.samples, bt(tc.now), cfg)
			require.Equal(t, tc.want.State, got.State)
			require.Equal(t, tc.want.Attempts, got.Attempts)
			require.InDelta(t, tc.want.ErrorRate, got.ErrorRate, 1e-12)
			require.True(t, tc.want.OpenedAt.Equal(got.OpenedAt), "opened at %v, want %v", got.OpenedAt, tc.want.OpenedAt)
			require.True(t, tc.want.RetryAt.Equal(got.RetryAt), "retry at %v, want %v", got.RetryAt, tc.want.RetryAt)
			require.Equal(t, tc.want.State == domain.BreakerHalfOpen, got.AllowsProbe())
		})
	}
}

func TestEvaluateBreakerUnsortedInput(t *testing.T) {
	t.Parallel()
	sorted := append(samples(0, ".......xxx"), samples(45, "x")...)
	shuffled := []domain.AttemptSample{sorted[10], sorted[3], sorted[9], sorted[0], sorted[8], sorted[1], sorted[7], sorted[2], sorted[6], sorted[4], sorted[5]}
	before := append([]domain.AttemptSample(nil), shuffled...)
	cfg := domain.DefaultBreakerConfig()
	require.Equal(t, domain.EvaluateBreaker(sorted, bt(46), cfg), domain.EvaluateBreaker(shuffled, bt(46), cfg))
	require.Equal(t, before, shuffled, "the input is not modified")
}

func TestBreakerConfigDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, domain.BreakerConfig{Window: time.Minute, MinAttempts: 10, ErrorRate: 0.25, CoolDown: 30 * time.Second}, domain.DefaultBreakerConfig())
	// Zero fields mean the defaults.
	s := samples(0, ".......xxx")
	require.Equal(t, domain.EvaluateBreaker(s, bt(20), domain.DefaultBreakerConfig()), domain.EvaluateBreaker(s, bt(20), domain.BreakerConfig{}))
	// A custom config is honoured.
	got := domain.EvaluateBreaker(samples(0, ".x.x"), bt(3), domain.BreakerConfig{Window: 10 * time.Second, MinAttempts: 4, ErrorRate: 0.5, CoolDown: 5 * time.Second})
	require.Equal(t, domain.BreakerOpen, got.State)
	require.True(t, got.RetryAt.Equal(bt(8)))
}

// TestBreakerOfSuccesses: for samples that are all successes,
// EvaluateBreaker answers BreakerOfSuccesses of the count in its window,
// whatever the configuration, the samples' spread and those past now.
func TestBreakerOfSuccesses(t *testing.T) {
	cases := []struct {
		name    string
		samples []domain.AttemptSample
		now     time.Time
		cfg     domain.BreakerConfig
	}{
		{"none", nil, bt(0), domain.DefaultBreakerConfig()},
		{"all in the window", samples(0, "........."), bt(20), domain.DefaultBreakerConfig()},
		{"some before it", samples(0, "...................."), bt(15), domain.BreakerConfig{Window: 10 * time.Second}},
		{"some after now", samples(0, ".........."), bt(4.5), domain.BreakerConfig{Window: 3 * time.Second}},
		{"on the window's edge", samples(0, "....."), bt(12), domain.BreakerConfig{Window: 10 * time.Second}},
		{"the defaults", samples(0, strings.Repeat(".", 100)), bt(99), domain.BreakerConfig{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			win := c.cfg.WithDefaults().Window
			n := 0
			for _, s := range c.samples {
				if s.At.After(c.now.Add(-win)) && !s.At.After(c.now) {
					n++
				}
			}
			require.Equal(t, domain.EvaluateBreaker(c.samples, c.now, c.cfg), domain.BreakerOfSuccesses(n))
		})
	}
}
