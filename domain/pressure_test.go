package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestWatermarks(t *testing.T) {
	t.Parallel()
	d := domain.Watermarks{}.WithDefaults()
	require.Equal(t, domain.Watermarks{High: 10_000, Low: 5_000, Limit: 50_000}, d)
	require.Equal(t, domain.Watermarks{High: 10, Low: 5, Limit: 50_000}, domain.Watermarks{High: 10, Low: 20}.WithDefaults(), "low under high")

	w := domain.Watermarks{High: 10, Low: 4, Limit: 20}
	for _, tc := range []struct {
		was   bool
		depth int
		want  bool
	}{
		{false, 10, false}, {false, 11, true}, // turns high above High
		{true, 5, true}, {true, 4, true}, {true, 3, false}, // back only under Low
		{false, 5, false},
	} {
		require.Equal(t, tc.want, w.QueueHigh(tc.was, tc.depth), "was high %v, depth %d", tc.was, tc.depth)
	}
	require.False(t, w.Overloaded(19))
	require.True(t, w.Overloaded(20))
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ depth, want, limit, admitted int }{
		{0, 5, 0, 5},   // no limit
		{0, 5, 40, 5},  // room for all
		{38, 5, 40, 2}, // the first two, the 39th and 40th
		{40, 1, 40, 0}, // the 41st
		{45, 3, 40, 0}, // over already (a recount will tell)
		{39, 1, 40, 1}, // the 40th
		{0, 0, 40, 0},
	} {
		require.Equal(t, tc.admitted, domain.Admit(tc.depth, tc.want, tc.limit), "%+v", tc)
	}
	for _, s := range domain.JobStatuses {
		require.Equal(t, s == domain.StatusSubmitted || s == domain.StatusTimeout, s.Waiting(), s)
	}
}
