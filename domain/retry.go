package domain

import "time"

// Retry defaults and bounds (seed design: 10 s base, doubling, 300 s cap,
// 3 retries).
const (
	DefaultBackoffBase = 10 * time.Second
	DefaultBackoffMax  = 300 * time.Second
	MinBackoffBase     = 100 * time.Millisecond
	MaxBackoffMax      = time.Hour
	DefaultMaxAttempts = 4 // the first try and 3 retries
	MaxMaxAttempts     = 20
	DefaultTimeout     = 30 * time.Second
	MinTimeout         = 100 * time.Millisecond
	MaxTimeout         = time.Hour
	DefaultMaxFanout   = 15
)

// Backoff is the wait before attempt number next (2, 3, …): base doubled for
// each attempt already failed, capped at max, then spread by jitter. jitter
// is a random value in [0, 1); the wait is scaled into [75 %, 125 %) of the
// nominal value (but never above max), so a burst of failures does not
// retry in lockstep.
func Backoff(next int, base, max time.Duration, jitter float64) time.Duration {
	if next < 2 {
		return 0
	}
	d := base
	for i := 2; i < next && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	d = time.Duration(float64(d) * (0.75 + 0.5*jitter))
	return min(d, max)
}

// RetryAfter combines the backoff with a Retry-After the agent asked for:
// the longer wins, so an agent that asks to be left alone is.
func RetryAfter(backoff, asked time.Duration) time.Duration {
	return max(backoff, asked)
}
