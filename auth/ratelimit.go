package auth

import (
	"math"
	"sync"
	"time"
)

// Limiter is a token bucket per key: Rate requests a second on average,
// bursts up to Burst. It lives in memory, so with several processes each
// allows the rate (a deployment divides the rate by its process count).
type Limiter struct {
	Rate  float64
	Burst float64

	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

// NewLimiter returns a limiter; rate <= 0 disables it.
func NewLimiter(rate, burst float64) *Limiter {
	return &Limiter{Rate: rate, Burst: math.Max(burst, 1), buckets: map[string]*bucket{}, now: time.Now}
}

// Allow takes a token for key, or says how long to wait for one.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil || l.Rate <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) > 100000 {
			l.evict(now)
		}
		b = &bucket{tokens: l.Burst, at: now}
		l.buckets[key] = b
	}
	b.tokens, b.at = l.refilled(b, now), now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / l.Rate * float64(time.Second))
}

// Blocked reports, without taking a token, whether key has none left and
// how long until it has one.
func (l *Limiter) Blocked(key string) (bool, time.Duration) {
	if l == nil || l.Rate <= 0 {
		return false, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return false, 0
	}
	tokens := l.refilled(b, now)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / l.Rate * float64(time.Second))
}

// refilled is what b holds at now.
func (l *Limiter) refilled(b *bucket, now time.Time) float64 {
	return math.Min(l.Burst, b.tokens+now.Sub(b.at).Seconds()*l.Rate)
}

// evict drops the buckets that have refilled (they hold what a new one
// would), so that many one-off keys cannot reset everyone's bucket; only if
// that frees nothing are all dropped.
func (l *Limiter) evict(now time.Time) {
	for k, b := range l.buckets {
		if l.refilled(b, now) >= l.Burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) > 100000 {
		l.buckets = map[string]*bucket{}
	}
}
