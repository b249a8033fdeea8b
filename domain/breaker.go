package domain

import (
	"slices"
	"time"
)

// BreakerState is the state of an agent's circuit breaker.
type BreakerState string

// Breaker states. The string values are stored, so they never change.
const (
	// BreakerClosed lets traffic through.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen stops traffic until the cool-down has passed.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen allows one probe delivery to test the agent.
	BreakerHalfOpen BreakerState = "half_open"
)

// BreakerConfig tunes EvaluateBreaker. A field that is not positive means its
// default, since none of them has a useful zero (a zero error rate would open
// on the first success).
type BreakerConfig struct {
	// Window is the length of the sliding error-rate window (default 60s).
	Window time.Duration
	// MinAttempts is how many attempts the window needs before the error
	// rate is trusted (default 10), so two failures out of three do not trip.
	MinAttempts int
	// ErrorRate is the failure share at or above which the breaker opens
	// (default 0.25).
	ErrorRate float64
	// CoolDown is how long the breaker stays open before it lets a probe
	// through (default 30s).
	CoolDown time.Duration
}

// Breaker defaults, see BreakerConfig.
const (
	DefaultBreakerWindow      = 60 * time.Second
	DefaultBreakerMinAttempts = 10
	DefaultBreakerErrorRate   = 0.25
	DefaultBreakerCoolDown    = 30 * time.Second
)

// DefaultBreakerConfig returns the breaker configuration used in production.
func DefaultBreakerConfig() BreakerConfig {
	return BreakerConfig{
		Window:      DefaultBreakerWindow,
		MinAttempts: DefaultBreakerMinAttempts,
		ErrorRate:   DefaultBreakerErrorRate,
		CoolDown:    DefaultBreakerCoolDown,
	}
}

// WithDefaults is c with the default of each setting it leaves unset: the
// configuration EvaluateBreaker applies.
func (c BreakerConfig) WithDefaults() BreakerConfig {
	if c.Window <= 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.MinAttempts <= 0 {
		c.MinAttempts = DefaultBreakerMinAttempts
	}
	if !(c.ErrorRate > 0) { // also catches NaN
		c.ErrorRate = DefaultBreakerErrorRate
	}
	if c.CoolDown <= 0 {
		c.CoolDown = DefaultBreakerCoolDown
	}
	return c
}

// AttemptSample is one finished delivery attempt to an agent.
type AttemptSample struct {
	At time.Time
	OK bool
}

// BreakerStatus is the breaker as EvaluateBreaker sees it at one moment.
type BreakerStatus struct {
	State BreakerState `json:"state"`
	// ErrorRate and Attempts describe every sample in (now-Window, now],
	// whatever the state; they are what the router's failure term reads.
	ErrorRate float64 `json:"error_rate"`
	Attempts  int     `json:"attempts"`
	// OpenedAt is when the breaker last (re)opened; zero when closed.
	OpenedAt time.Time `json:"opened_at,omitzero"`
	// RetryAt is OpenedAt+CoolDown, when the breaker turns half-open; zero
	// when closed.
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// AllowsProbe reports whether the breaker lets exactly one probe delivery
// through. The breaker is a pure function of finished attempts, so it cannot
// know a probe is already under way: the dispatcher must claim the probe
// atomically (one delivery at a time) until its result is recorded.
func (s BreakerStatus) AllowsProbe() bool {
	return s.State == BreakerHalfOpen
}

// EvaluateBreaker replays the samples up to now in time order and returns the
// breaker's state at now. The rule:
//
//   - Closed: at each sample, count the attempts and failures in the sliding
//     window (sample.At-Window, sample.At], leaving out anything before the
//     breaker last closed. At the first sample where attempts >= MinAttempts
//     and failures/attempts >= ErrorRate the breaker opens: OpenedAt is that
//     sample's time and RetryAt is OpenedAt+CoolDown.
//   - Open: samples before RetryAt are ignored; they are results of work
//     sent before it opened. The first sample at or after RetryAt is the
//     probe's result: a success closes the breaker and forgets the counts
//     (the old failures would otherwise trip it again at once); a failure
//     reopens it with OpenedAt at that failure and a new cool-down.
//   - At now, an open breaker whose RetryAt <= now is half-open, and stays so
//     until a probe result arrives, however long that takes.
//
// Only the window decides whether the breaker trips, but older samples still
// matter in one way: they remember that it opened. Pass at least the samples
// of the last Window+CoolDown, so that an opening and its cool-down are never
// forgotten; pass more to also remember a chain of failed probes (each one
// reopens the breaker only if the opening before it is in the input).
// Samples after now are ignored. Samples should be sorted by At ascending;
// if they are not, a sorted copy is used (the input is never modified). The
// cost is O(n) for sorted input.
//
// Attempts and ErrorRate in the result describe the window (now-Window, now]
// whatever the state, which is what the router's failure term wants.
func EvaluateBreaker(samples []AttemptSample, now time.Time, cfg BreakerConfig) BreakerStatus {
	cfg = cfg.WithDefaults()
	if !slices.IsSortedFunc(samples, compareSampleTime) {
		samples = slices.Clone(samples)
		slices.SortStableFunc(samples, compareSampleTime)
	}
	var (
		st                   = BreakerStatus{State: BreakerClosed}
		winStart             = now.Add(-cfg.Window)
		winAttempts, winFail int // samples in (now-Window, now]
		// The closed state counts samples[left:i+1], those in the sliding
		// window that arrived since the breaker last closed.
		left, attempts, failures int
	)
	for i, s := range samples {
		if s.At.After(now) {
			break
		}
		if s.At.After(winStart) {
			winAttempts++
			if !s.OK {
				winFail++
			}
		}
		switch st.State {
		case BreakerClosed:
			attempts++
			if !s.OK {
				failures++
			}
			for start := s.At.Add(-cfg.Window); !samples[left].At.After(start); left++ {
				attempts--
				if !samples[left].OK {
					failures--
				}
			}
			if attempts >= cfg.MinAttempts && float64(failures)/float64(attempts) >= cfg.ErrorRate {
				st.State = BreakerOpen
				st.OpenedAt = s.At
				st.RetryAt = s.At.Add(cfg.CoolDown)
			}
		case BreakerOpen:
			if s.At.Before(st.RetryAt) {
				continue
			}
			if s.OK {
				st.State = BreakerClosed
				st.OpenedAt, st.RetryAt = time.Time{}, time.Time{}
				left, attempts, failures = i+1, 0, 0
			} else {
				st.OpenedAt = s.At
				st.RetryAt = s.At.Add(cfg.CoolDown)
			}
		}
	}
	if st.State == BreakerOpen && !now.Before(st.RetryAt) {
		st.State = BreakerHalfOpen
	}
	st.Attempts = winAttempts
	if winAttempts > 0 {
		st.ErrorRate = float64(winFail) / float64(winAttempts)
	}
	return st
}

// BreakerOfSuccesses is EvaluateBreaker's answer for samples that are all
// successes, inWindow of them in (now-Window, now]: closed, whatever came
// before, with no error. A caller that knows an agent had no failure since
// the horizon it would pass needs only that count, not the samples.
func BreakerOfSuccesses(inWindow int) BreakerStatus {
	return BreakerStatus{State: BreakerClosed, Attempts: inWindow}
}

func compareSampleTime(a, b AttemptSample) int {
	return a.At.Compare(b.At)
}

// BreakerTurned is the data of BREAKER_OPENED and BREAKER_CLOSED.
type BreakerTurned struct {
	ErrorRate float64 `json:"error_rate"`
	Attempts  int     `json:"attempts"`
}
