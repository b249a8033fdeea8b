package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Candidate is an agent a lookup found: one the caller may call directly,
// at Endpoint, with Grant.
type Candidate struct {
	AgentID         string  `json:"agent_id"`
	Namespace       string  `json:"namespace"`
	Endpoint        string  `json:"endpoint"`
	Protocol        string  `json:"protocol"`
	ProtocolVersion string  `json:"protocol_version,omitempty"`
	Version         string  `json:"version,omitempty"`
	Score           float64 `json:"score"`
	State           string  `json:"state"`
	// TTLMS is how long, in milliseconds, this candidate may be cached.
	TTLMS int64 `json:"ttl_ms"`
	// Grant is the invocation grant the agent checks (X-Reach-Grant): for
	// this agent and capability, until GrantExpiresAt.
	Grant          string    `json:"grant"`
	GrantExpiresAt time.Time `json:"grant_expires_at"`
}

// LookupOptions narrow a lookup; zero fields take the service's defaults.
type LookupOptions struct {
	// Hint is free text the routing score compares with agents' aliases.
	Hint string
	// Namespace is the agents' namespace (the key's, by default).
	Namespace   string
	Constraints Constraints
	// Limit is how many candidates, best first (3 by default, at most 20).
	Limit int
	// NoCache asks the registry even when the cache has a fresh answer.
	NoCache bool
}

// LookupResult is a lookup's answer.
type LookupResult struct {
	// Candidates are ranked best first, scored as brokered routing scores.
	Candidates []Candidate
	// TTL is how long the answer may still be used as fresh.
	TTL time.Duration
	// FetchedAt is when the registry gave this answer.
	FetchedAt time.Time
	// Cached: served from memory without asking the registry.
	Cached bool
	// Stale: the registry could not be reached, and this is the last list
	// known (from memory, or from the CacheFile of an earlier run). Its
	// grants may have expired: an agent refuses an expired grant, and
	// Invoke then tries the next candidate, so a stale list works as long
	// as its grants last (5 minutes from the lookup that made them).
	Stale bool
}

type lookupRequest struct {
	Capability  string       `json:"capability"`
	Hint        string       `json:"hint,omitempty"`
	Namespace   string       `json:"namespace,omitempty"`
	Constraints *Constraints `json:"constraints,omitempty"`
	Limit       int          `json:"limit,omitempty"`
}

type lookupAnswer struct {
	Candidates []Candidate `json:"candidates"`
	TTLMS      int64       `json:"ttl_ms"`
	// WatchFrom is the log position the answer was computed at: agent
	// changes after it may not be in it.
	WatchFrom int64 `json:"watch_from"`
}

// Lookup answers the ranked candidates for capability (POST /v1/lookup,
// scope agents:lookup): from the cache while its answer is fresh (the
// answer's ttl_ms, capped by the earliest grant expiry, and cut short by
// the watch feed), else from the registry. When the registry is
// unreachable (no answer, 502, 503, 504, or no answer within
// LookupTimeout) and a list for the same lookup is known, that list is
// answered with Stale set and no error. Errors: ErrInvalidArgument,
// ErrPermissionDenied, ErrUnauthenticated (never retried), ErrUnreachable
// (with nothing known).
func (c *Client) Lookup(ctx context.Context, capability string, opts LookupOptions) (LookupResult, error) {
	key := cacheKey(capability, opts)
	now := c.cfg.now()
	if !opts.NoCache {
		if res, ok := c.cache.fresh(key, now); ok {
			return res, nil
		}
	}
	f := c.fetch(ctx, key, capability, opts)
	select {
	case <-f.done:
	case <-ctx.Done():
		return LookupResult{}, fmt.Errorf("look up %s: %w", capability, ctx.Err())
	}
	if f.err != nil {
		if ctx.Err() == nil && unreachable(f.err) {
			if res, ok := c.cache.stale(key); ok {
				return res, nil
			}
		}
		return LookupResult{}, f.err
	}
	return LookupResult{Candidates: slices.Clone(f.ans.Candidates), TTL: time.Duration(f.ans.TTLMS) * time.Millisecond, FetchedAt: f.fetched}, nil
}

// flight is one lookup request under way, which every lookup of the same
// question waits for rather than sending its own: when a hot answer
// expires, a crowd of callers makes one request, not one each.
type flight struct {
	done    chan struct{}
	ans     lookupAnswer
	fetched time.Time
	err     error
}

// fetch answers the request under way for key, or starts one. The request
// runs on its own goroutine, bounded by LookupTimeout and not by any one
// caller's context, so a caller giving up does not fail the others.
func (c *Client) fetch(ctx context.Context, key, capability string, opts LookupOptions) *flight {
	c.flightMu.Lock()
	defer c.flightMu.Unlock()
	if f, ok := c.flights[key]; ok {
		return f
	}
	f := &flight{done: make(chan struct{})}
	c.flights[key] = f
	seq := c.cache.sequence()
	go func() {
		f.ans, f.err = c.lookupRemote(context.WithoutCancel(ctx), capability, opts)
		f.fetched = c.cfg.now()
		if f.err == nil {
			c.cache.store(key, opts.Namespace, f.ans, f.fetched, seq)
		}
		c.flightMu.Lock()
		delete(c.flights, key)
		c.flightMu.Unlock()
		close(f.done)
	}()
	return f
}

// lookupRemote asks the registry, within LookupTimeout.
func (c *Client) lookupRemote(ctx context.Context, capability string, opts LookupOptions) (lookupAnswer, error) {
	req := lookupRequest{Capability: capability, Hint: opts.Hint, Namespace: opts.Namespace, Limit: opts.Limit}
	if !opts.Constraints.empty() {
		cons := opts.Constraints
		req.Constraints = &cons
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.lookupTimeout)
	defer cancel()
	var ans lookupAnswer
	err := c.do(lctx, http.MethodPost, "/v1/lookup", nil, req, &ans)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: no answer within %s: %w", ErrUnreachable, c.cfg.lookupTimeout, err)
	}
	if err != nil {
		return lookupAnswer{}, fmt.Errorf("look up %s: %w", capability, err)
	}
	return ans, nil
}

// cacheKey is what makes two lookups the same question.
func cacheKey(capability string, opts LookupOptions) string {
	b, _ := json.Marshal(struct {
		C string      `json:"c"`
		H string      `json:"h,omitempty"`
		N string      `json:"n,omitempty"`
		K Constraints `json:"k"`
		L int         `json:"l,omitempty"`
	}{capability, opts.Hint, opts.Namespace, opts.Constraints, opts.Limit})
	return string(b)
}
