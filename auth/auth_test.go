package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/pgtest"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var root = &Principal{KeyID: "root", Namespace: AllNamespaces, Scopes: []string{ScopeAdmin}}

func newStore(t *testing.T) (*Store, *testClock) {
	t.Helper()
	pool := pgtest.NewPool(t)
	s := NewStore(pool, eventstore.New(pool), "")
	c := &testClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s.SetClock(c.now)
	return s, c
}

// TestExpiryCheckedOnEveryUse: a key that expires while its principal is
// cached stops working at its expiry, not when the cache entry ends.
func TestExpiryCheckedOnEveryUse(t *testing.T) {
	t.Parallel()
	s, clock := newStore(t)
	ctx := context.Background()
	start := clock.now()
	key, _, err := s.Create(ctx, NewKey{Namespace: "a", Scopes: []string{ScopeJobsRead}, TTL: 10 * time.Second}, root, domain.Metadata{})
	require.NoError(t, err)

	clock.set(start.Add(9 * time.Second)) // looked up and cached until 11 s
	p, err := s.Authenticate(ctx, key)
	require.NoError(t, err)
	require.Equal(t, "a", p.Namespace)

	clock.set(start.Add(10*time.Second + 500*time.Millisecond)) // still cached, but expired
	_, err = s.Authenticate(ctx, key)
	require.ErrorIs(t, err, ErrExpired)
}

// TestAuthenticateAndRevoke: unknown, valid and revoked keys.
func TestAuthenticateAndRevoke(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	_, err := s.Authenticate(ctx, "")
	require.ErrorIs(t, err, ErrNoKey)
	_, err = s.Authenticate(ctx, "ark_nope_nope")
	require.ErrorIs(t, err, ErrUnknownKey)

	key, info, err := s.Create(ctx, NewKey{Namespace: "a", Scopes: []string{"jobs:submit:doc.*"}}, root, domain.Metadata{})
	require.NoError(t, err)
	p, err := s.Authenticate(ctx, key)
	require.NoError(t, err)
	require.True(t, p.CanSubmit("doc.parse"))
	require.False(t, p.CanSubmit("pay.out"))
	require.False(t, p.Has(ScopeJobsRead))

	other := &Principal{KeyID: "b-admin", Namespace: "b", Scopes: []string{ScopeAdmin}}
	require.ErrorIs(t, s.Revoke(ctx, info.KeyID, other, domain.Metadata{}), domain.ErrNotFound, "another namespace's admin cannot see the key")
	require.NoError(t, s.Revoke(ctx, info.KeyID, root, domain.Metadata{}))
	_, err = s.Authenticate(ctx, key)
	require.ErrorIs(t, err, ErrRevoked)
}

// TestCreateRefusesWhatTheCreatorLacks: no key of another namespace, no
// scope the creator does not hold.
func TestCreateRefusesWhatTheCreatorLacks(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	reader := &Principal{KeyID: "r", Namespace: "a", Scopes: []string{ScopeJobsRead}}
	for _, req := range []NewKey{
		{Namespace: "b", Scopes: []string{ScopeJobsRead}},
		{Namespace: AllNamespaces, Scopes: []string{ScopeJobsRead}},
		{Namespace: "a", Scopes: []string{ScopeAdmin}},
		{Namespace: "a", Scopes: []string{"root"}},
		{Namespace: "a"},
	} {
		_, _, err := s.Create(ctx, req, reader, domain.Metadata{})
		var fe *domain.FieldError
		require.ErrorAs(t, err, &fe, "%+v", req)
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"doc.*", "doc.parse", true}, {"doc.*", "doc.", true}, {"doc.*", "pay.out", false},
		{"*", "", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"exact", "exact", true}, {"exact", "exactly", false},
	} {
		require.Equal(t, tc.want, Match(tc.pattern, tc.s), "%q ~ %q", tc.pattern, tc.s)
	}
}

func TestLimiterBlockedDoesNotTake(t *testing.T) {
	t.Parallel()
	l := NewLimiter(1, 2)
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }
	blocked, _ := l.Blocked("k")
	require.False(t, blocked)
	ok, _ := l.Allow("k")
	require.True(t, ok)
	ok, _ = l.Allow("k")
	require.True(t, ok)
	blocked, wait := l.Blocked("k")
	require.True(t, blocked)
	require.Equal(t, time.Second, wait)
	now = now.Add(time.Second)
	blocked, _ = l.Blocked("k")
	require.False(t, blocked, "refilled")
}
