package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	for _, c := range []struct {
		name    string
		samples []time.Duration
		ceiling time.Duration
		want    time.Duration
	}{
		{"no calls yet: the ceiling", nil, 30 * time.Second, 30 * time.Second},
		{"fewer than ten answered: the ceiling", ms(5, 5, 5, 5, 5, 5, 5, 5, 5), 30 * time.Second, 30 * time.Second},
		{"fast calls: at least a second", ms(5, 5, 5, 5, 5, 5, 5, 5, 5, 9), 30 * time.Second, time.Second},
		{"three times the slowest of ten", ms(500, 500, 500, 500, 500, 500, 500, 500, 500, 2000), 30 * time.Second, 6 * time.Second},
		{"never past the ceiling", ms(500, 500, 500, 500, 500, 500, 500, 500, 500, 20000), 30 * time.Second, 30 * time.Second},
		{"a ceiling under a second wins", ms(5, 5, 5, 5, 5, 5, 5, 5, 5, 5), 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		require.Equal(t, c.want, callTimeout(c.samples, c.ceiling), c.name)
	}
}

func TestOrderCandidates(t *testing.T) {
	t.Parallel()
	cands := []Candidate{{AgentID: "a"}, {AgentID: "b"}, {AgentID: "c"}, {AgentID: "d"}}
	ids := func(cs []Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.AgentID)
		}
		return out
	}
	q := func(names ...string) func(Candidate) bool {
		return func(c Candidate) bool {
			for _, n := range names {
				if c.AgentID == n {
					return true
				}
			}
			return false
		}
	}
	require.Equal(t, []string{"a", "b", "c", "d"}, ids(orderCandidates(cands, q())))
	require.Equal(t, []string{"b", "d", "a", "c"}, ids(orderCandidates(cands, q("a", "c"))))
	require.Equal(t, []string{"a", "b", "c", "d"}, ids(orderCandidates(cands, q("a", "b", "c", "d"))), "all quarantined: all tried, in order")

	m := newMemory()
	now := time.Now()
	m.quarantine("", "a", now.Add(time.Second))
	require.Equal(t, []string{"b", "c", "d", "a"}, ids(m.order(cands, now)))
	require.Equal(t, []string{"a", "b", "c", "d"}, ids(m.order(cands, now.Add(time.Second))), "the quarantine ends")
}
