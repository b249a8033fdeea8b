package domain

import (
	"fmt"
	"time"
)

// Retention: how long a finished job's history is kept, and which of the
// log's time partitions may go.

// Retention defaults and bounds.
const (
	// DefaultRetention is the deployment's period when none is configured.
	DefaultRetention = 30 * 24 * time.Hour
	// MinRetention is the shortest period a namespace may ask for.
	MinRetention = time.Minute
	// DefaultPartitionWidth is the span of job submit times one partition
	// of the log holds: it bounds how long past its period a job's history
	// may stay (a partition goes when all of its jobs are past theirs).
	DefaultPartitionWidth = 24 * time.Hour
	// MinPartitionWidth is the narrowest partition (for tests and soaks).
	MinPartitionWidth = time.Minute
	// PartitionSkew is how long after a partition's end a submit may still
	// be born in it: a process whose clock runs behind names its jobs in
	// the past. No partition is dropped before.
	PartitionSkew = time.Minute
)

// TimeRange is [Low, High).
type TimeRange struct{ Low, High time.Time }

// PartitionsAhead is how far past now the log's partitions must exist so
// that no submit finds none: three widths, and at least ten minutes.
func PartitionsAhead(width time.Duration) time.Duration {
	return max(3*width, 10*time.Minute)
}

// PartitionsToCreate are the ranges to create so that [from, to) is
// covered, given the partitions that exist (or existed: a dropped range is
// never made again). Ranges are aligned to width from the Unix epoch; a
// slot partly covered (the width changed) gets the pieces left, so ranges
// never overlap.
func PartitionsToCreate(existing []TimeRange, from, to time.Time, width time.Duration) []TimeRange {
	if width <= 0 || !to.After(from) {
		return nil
	}
	var out []TimeRange
	for s := from.Truncate(width); s.Before(to); s = s.Add(width) {
		out = append(out, subtract(TimeRange{Low: s, High: s.Add(width)}, existing)...)
	}
	return out
}

// subtract is what is left of r once every range of taken is removed.
func subtract(r TimeRange, taken []TimeRange) []TimeRange {
	left := []TimeRange{r}
	for _, t := range taken {
		var next []TimeRange
		for _, l := range left {
			if !t.Low.Before(l.High) || !l.Low.Before(t.High) {
				next = append(next, l) // no overlap
				continue
			}
			if l.Low.Before(t.Low) {
				next = append(next, TimeRange{Low: l.Low, High: t.Low})
			}
			if t.High.Before(l.High) {
				next = append(next, TimeRange{Low: t.High, High: l.High})
			}
		}
		left = next
	}
	return left
}

// PartitionJobs is what the jobs born in one partition say about it: how
// many are not yet done with (running, waiting, or with a callback still
// owed), and when the last of the finished ones reaches the end of its
// namespace's period (zero when none finished).
type PartitionJobs struct {
	Live    int
	LastDue time.Time
}

// PartitionDroppable decides whether the partition r of the log may go at
// now: no job can still be born in it, none of its jobs is live, and every
// one is past its period. Retention is a minimum: a job is never dropped
// early, and a partition's width bounds how late.
func PartitionDroppable(r TimeRange, jobs PartitionJobs, now time.Time) bool {
	return !r.High.Add(PartitionSkew).After(now) && jobs.Live == 0 && !jobs.LastDue.After(now)
}

// PartitionHeld says why the partition r of the log, not droppable at now,
// is kept past what the deployment's period alone would keep it (its end
// plus period): jobs in it still live, or finished so late that their
// period runs on. It is "" while the partition is within that time, or
// droppable: an operator is told only of a partition that holds the log
// back.
func PartitionHeld(r TimeRange, jobs PartitionJobs, period time.Duration, now time.Time) string {
	if PartitionDroppable(r, jobs, now) || r.High.Add(PartitionSkew).Add(period).After(now) {
		return ""
	}
	if jobs.Live > 0 {
		return fmt.Sprintf("%d of its jobs are unfinished or still owed a callback", jobs.Live)
	}
	return fmt.Sprintf("a job in it finished late and is kept until %s", jobs.LastDue.UTC().Format(time.RFC3339))
}

// RetentionFor is a namespace's period: its own when it asked for one
// (never more than the deployment's), else the deployment's.
func RetentionFor(own, deployment time.Duration) time.Duration {
	if own <= 0 || own > deployment {
		return deployment
	}
	return own
}

// ValidateRetention checks a namespace's requested period against the
// deployment's; zero asks for the deployment's.
func ValidateRetention(keep, deployment time.Duration) error {
	switch {
	case keep == 0:
		return nil
	case keep < MinRetention:
		return fieldErr("retention_seconds", "must be at least %d (or 0 for the deployment's period)", int(MinRetention.Seconds()))
	case keep > deployment:
		return fieldErr("retention_seconds", "may not exceed the deployment's period of %d seconds", int(deployment.Seconds()))
	}
	return nil
}

// EventRetentionPolicyChanged, on "policy:retention:<namespace>": the
// namespace asked for a period of its own (or gave it up).
const EventRetentionPolicyChanged EventType = "RETENTION_POLICY_CHANGED"

// RetentionPolicyChanged is its data: the namespace's own period before
// and after, in seconds (0: the deployment's).
type RetentionPolicyChanged struct {
	Namespace   string `json:"namespace"`
	FromSeconds int64  `json:"from_seconds"`
	ToSeconds   int64  `json:"to_seconds"`
}

// RetentionStream is the stream of a namespace's retention policy.
func RetentionStream(namespace string) string { return "policy:retention:" + namespace }

// RetentionPolicy is a namespace's retention as the deployment applies it.
type RetentionPolicy struct {
	Namespace string
	// Own is the period the namespace asked for (0: none).
	Own time.Duration
	// Deployment is the deployment's period, the most any namespace keeps.
	Deployment time.Duration
	// PartitionWidth is the span of submit times a partition of the log
	// holds: how late past its period a job's history may go.
	PartitionWidth time.Duration
	// ArchiveTo is where partitions are written before they are dropped
	// ("": nowhere).
	ArchiveTo string
	// Version counts the namespace's changes.
	Version int
}

// Period is the period in force for the namespace.
func (p RetentionPolicy) Period() time.Duration { return RetentionFor(p.Own, p.Deployment) }
