package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestPartitionsToCreate(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	at := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, time.UTC) }
	r := func(a, b time.Time) domain.TimeRange { return domain.TimeRange{Low: a, High: b} }
	for _, tc := range []struct {
		name     string
		existing []domain.TimeRange
		from, to time.Time
		width    time.Duration
		want     []domain.TimeRange
	}{
		{name: "nothing yet: aligned slots over the span", from: at(3, 18), to: at(5, 1), width: day,
			want: []domain.TimeRange{r(at(3, 0), at(4, 0)), r(at(4, 0), at(5, 0)), r(at(5, 0), at(6, 0))}},
		{name: "covered already", existing: []domain.TimeRange{r(at(3, 0), at(6, 0))}, from: at(3, 18), to: at(5, 1), width: day},
		{name: "only the missing end", existing: []domain.TimeRange{r(at(3, 0), at(4, 0))}, from: at(3, 18), to: at(4, 12), width: day,
			want: []domain.TimeRange{r(at(4, 0), at(5, 0))}},
		{name: "a narrower width fills around wider ranges, never overlapping", existing: []domain.TimeRange{r(at(3, 0), at(3, 12))},
			from: at(3, 6), to: at(3, 14), width: 4 * time.Hour,
			want: []domain.TimeRange{r(at(3, 12), at(3, 16))}},
		{name: "a wider width takes the pieces a slot has left", existing: []domain.TimeRange{r(at(3, 6), at(3, 8))},
			from: at(3, 1), to: at(3, 2), width: day,
			want: []domain.TimeRange{r(at(3, 0), at(3, 6)), r(at(3, 8), at(4, 0))}},
		{name: "a dropped range is never made again", existing: []domain.TimeRange{r(at(2, 0), at(3, 0))},
			from: at(2, 12), to: at(3, 1), width: day, want: []domain.TimeRange{r(at(3, 0), at(4, 0))}},
		{name: "no width", from: at(3, 0), to: at(4, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, domain.PartitionsToCreate(tc.existing, tc.from, tc.to, tc.width))
		})
	}
}

func TestPartitionDroppable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	past := domain.TimeRange{Low: now.Add(-2 * time.Hour), High: now.Add(-time.Hour)}
	for _, tc := range []struct {
		name string
		r    domain.TimeRange
		jobs domain.PartitionJobs
		want bool
	}{
		{name: "empty and past", r: past, want: true},
		{name: "every job past its period", r: past, jobs: domain.PartitionJobs{LastDue: now.Add(-time.Second)}, want: true},
		{name: "due exactly now", r: past, jobs: domain.PartitionJobs{LastDue: now}, want: true},
		{name: "a job within its period", r: past, jobs: domain.PartitionJobs{LastDue: now.Add(time.Second)}},
		{name: "a live job", r: past, jobs: domain.PartitionJobs{Live: 1}},
		{name: "a job may still be born in it", r: domain.TimeRange{Low: now.Add(-time.Hour), High: now.Add(-domain.PartitionSkew / 2)}},
		{name: "the present", r: domain.TimeRange{Low: now.Add(-time.Hour), High: now.Add(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, domain.PartitionDroppable(tc.r, tc.jobs, now))
		})
	}
}

func TestPartitionHeld(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	period := 24 * time.Hour
	old := domain.TimeRange{Low: now.Add(-50 * time.Hour), High: now.Add(-49 * time.Hour)}
	recent := domain.TimeRange{Low: now.Add(-3 * time.Hour), High: now.Add(-2 * time.Hour)}
	for _, tc := range []struct {
		name string
		r    domain.TimeRange
		jobs domain.PartitionJobs
		want string
	}{
		{name: "droppable", r: old},
		{name: "live, but within its period", r: recent, jobs: domain.PartitionJobs{Live: 2}},
		{name: "live past its period", r: old, jobs: domain.PartitionJobs{Live: 2}, want: "2 of its jobs are unfinished or still owed a callback"},
		{name: "a job that finished late", r: old, jobs: domain.PartitionJobs{LastDue: now.Add(time.Hour)},
			want: "a job in it finished late and is kept until 2026-12-03T13:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, domain.PartitionHeld(tc.r, tc.jobs, period, now))
		})
	}
}

func TestRetentionFor(t *testing.T) {
	t.Parallel()
	dep := 30 * 24 * time.Hour
	require.Equal(t, dep, domain.RetentionFor(0, dep), "none asked: the deployment's")
	require.Equal(t, time.Hour, domain.RetentionFor(time.Hour, dep), "less: its own")
	require.Equal(t, dep, domain.RetentionFor(2*dep, dep), "never more than the deployment allows")

	require.NoError(t, domain.ValidateRetention(0, dep))
	require.NoError(t, domain.ValidateRetention(domain.MinRetention, dep))
	require.NoError(t, domain.ValidateRetention(dep, dep))
	for _, bad := range []time.Duration{time.Second, dep + time.Second} {
		err := domain.ValidateRetention(bad, dep)
		var fe *domain.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", bad, err)
		require.Equal(t, "retention_seconds", fe.Field)
		require.ErrorIs(t, err, domain.ErrInvalid)
	}
}

func TestPartitionsAhead(t *testing.T) {
	t.Parallel()
	require.Equal(t, 72*time.Hour, domain.PartitionsAhead(24*time.Hour))
	require.Equal(t, 10*time.Minute, domain.PartitionsAhead(time.Minute))
}
