// Package auth authenticates callers and operators by API key and decides
// what a key may do: its namespace and its scopes.
//
// Keys look like "ark_<id>_<secret>"; only the SHA-256 of the whole key is
// stored. A key belongs to one namespace (or "*", every namespace) and
// carries scopes: "admin", "jobs:read", "jobs:approve", "agents:read",
// "agents:write", "agents:lookup", "capabilities:read",
// "jobs:submit:<capability pattern>" and "agents:lookup:<capability
// pattern>", where the pattern may use '*' for any run of characters. Creating and revoking keys are
// events on the namespace's "keys:<namespace>" stream, with the actor.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qAPIKeyByHash = queries.Must("APIKeyByHash")
	qInsertAPIKey = queries.Must("InsertAPIKey")
	qLockAPIKey   = queries.Must("LockAPIKey")
	qRevokeAPIKey = queries.Must("RevokeAPIKey")
	qListAPIKeys  = queries.Must("ListAPIKeys")
)

// Errors of authentication; all of them mean 401.
var (
	ErrNoKey      = domain.NewError(domain.ErrUnauthenticated, "an API key is required: Authorization: Bearer ark_…")
	ErrUnknownKey = domain.NewError(domain.ErrUnauthenticated, "API key not recognised")
	ErrRevoked    = domain.NewError(domain.ErrUnauthenticated, "API key revoked")
	ErrExpired    = domain.NewError(domain.ErrUnauthenticated, "API key expired")
)

// Scopes.
const (
	ScopeAdmin       = "admin"
	ScopeJobsRead    = "jobs:read"
	ScopeJobsApprove = "jobs:approve"
	ScopeAgentsRead  = "agents:read"
	ScopeAgentsWrite = "agents:write"
	// ScopeAgentsLookup: look up agents to call them directly, and report
	// what came of it (lookup mode).
	ScopeAgentsLookup = "agents:lookup"
	// ScopeCapabilitiesRead: read the capability catalogue and resolve
	// intents against it (agents:read also does).
	ScopeCapabilitiesRead = "capabilities:read"
	// ScopeJobsSubmitPrefix starts "jobs:submit:<capability pattern>".
	ScopeJobsSubmitPrefix = "jobs:submit:"
	// ScopeAgentsLookupPrefix starts "agents:lookup:<capability pattern>":
	// agents:lookup for the capabilities the pattern matches only.
	ScopeAgentsLookupPrefix = "agents:lookup:"
)

// AllNamespaces is the namespace of a key that reaches every namespace.
const AllNamespaces = "*"

// Principal is who a request acts for.
type Principal struct {
	KeyID     string
	Namespace string
	Scopes    []string
	// expires is the key's end, if it has one: checked on every use, not
	// only when the key is looked up.
	expires *time.Time
}

// ExpiresAt is when the principal's key stops working, nil when it never
// does.
func (p *Principal) ExpiresAt() *time.Time { return p.expires }

// Actor names the principal in event metadata.
func (p *Principal) Actor() string { return "key:" + p.KeyID }

// Has reports whether the principal holds scope (admin holds every scope).
func (p *Principal) Has(scope string) bool {
	for _, s := range p.Scopes {
		if s == scope || s == ScopeAdmin {
			return true
		}
	}
	return false
}

// CanSubmit reports whether the principal may submit jobs for capability.
func (p *Principal) CanSubmit(capability string) bool {
	for _, s := range p.Scopes {
		if s == ScopeAdmin {
			return true
		}
		if pat, ok := strings.CutPrefix(s, ScopeJobsSubmitPrefix); ok && Match(pat, capability) {
			return true
		}
	}
	return false
}

// CanLookup reports whether the principal may look up the agents of
// capability, and report on its direct calls: agents:lookup, or
// agents:lookup:<pattern> matching it.
func (p *Principal) CanLookup(capability string) bool {
	for _, s := range p.Scopes {
		if s == ScopeAdmin || s == ScopeAgentsLookup {
			return true
		}
		if pat, ok := strings.CutPrefix(s, ScopeAgentsLookupPrefix); ok && Match(pat, capability) {
			return true
		}
	}
	return false
}

// LooksUp reports whether the principal holds a lookup scope of any kind
// (agents:lookup, or one limited to a capability pattern).
func (p *Principal) LooksUp() bool {
	for _, s := range p.Scopes {
		if s == ScopeAdmin || s == ScopeAgentsLookup || strings.HasPrefix(s, ScopeAgentsLookupPrefix) {
			return true
		}
	}
	return false
}

// Sees reports whether the principal reaches namespace ns.
func (p *Principal) Sees(ns string) bool { return p.Namespace == AllNamespaces || p.Namespace == ns }

// Match reports whether s matches pattern, where '*' stands for any run of
// characters (possibly empty) and everything else for itself.
func Match(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	if pattern == "" {
		return true
	}
	for i := 0; i <= len(s); i++ {
		if Match(pattern, s[i:]) {
			return true
		}
	}
	return false
}

// ValidScope reports whether s is a scope this service knows.
func ValidScope(s string) bool {
	switch s {
	case ScopeAdmin, ScopeJobsRead, ScopeJobsApprove, ScopeAgentsRead, ScopeAgentsWrite, ScopeAgentsLookup, ScopeCapabilitiesRead:
		return true
	}
	pat, ok := strings.CutPrefix(s, ScopeJobsSubmitPrefix)
	if !ok {
		pat, ok = strings.CutPrefix(s, ScopeAgentsLookupPrefix)
	}
	return ok && pat != "" && domain.ValidCapability(strings.ReplaceAll(pat, "*", "x"))
}

// Store keeps the keys.
type Store struct {
	pool      *pgxpool.Pool
	store     *eventstore.Store
	bootstrap []byte // hash of AGENTREACH_ADMIN_KEY, if set
	now       func() time.Time

	mu    sync.Mutex
	cache map[string]cached // by key hash
}

type cached struct {
	p       *Principal
	err     error
	expires time.Time // of the cache entry
}

// cacheFor bounds how long a revocation takes to reach other processes.
const cacheFor = 2 * time.Second

// NewStore returns a Store. bootstrapKey, if not empty, is an admin key for
// every namespace that needs no row (AGENTREACH_ADMIN_KEY).
func NewStore(pool *pgxpool.Pool, store *eventstore.Store, bootstrapKey string) *Store {
	s := &Store{pool: pool, store: store, now: time.Now, cache: map[string]cached{}}
	if bootstrapKey != "" {
		s.bootstrap = hash(bootstrapKey)
	}
	return s
}

// SetClock replaces the store's clock (tests).
func (s *Store) SetClock(now func() time.Time) { s.now = now }

func hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Authenticate returns the principal of key, or ErrNoKey, ErrUnknownKey,
// ErrRevoked or ErrExpired.
func (s *Store) Authenticate(ctx context.Context, key string) (*Principal, error) {
	if key == "" {
		return nil, ErrNoKey
	}
	h := hash(key)
	if s.bootstrap != nil && subtle.ConstantTimeCompare(h, s.bootstrap) == 1 {
		return &Principal{KeyID: "bootstrap", Namespace: AllNamespaces, Scopes: []string{ScopeAdmin}}, nil
	}
	now := s.now()
	s.mu.Lock()
	c, ok := s.cache[string(h)]
	s.mu.Unlock()
	if ok && now.Before(c.expires) {
		if c.p != nil && c.p.expires != nil && !now.Before(*c.p.expires) {
			return nil, ErrExpired
		}
		return c.p, c.err
	}
	p, err := s.lookup(ctx, h, now)
	if err != nil && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrRevoked) && !errors.Is(err, ErrExpired) {
		return nil, err // a database problem is not cached
	}
	s.mu.Lock()
	if len(s.cache) > 10000 {
		s.cache = map[string]cached{}
	}
	s.cache[string(h)] = cached{p: p, err: err, expires: now.Add(cacheFor)}
	s.mu.Unlock()
	return p, err
}

// Known reports whether key is in this process's cache as a valid key, so
// a caller can admit it without a lookup (an address over its budget of
// failed authentications still serves its known keys).
func (s *Store) Known(key string) bool {
	if key == "" {
		return false
	}
	h := hash(key)
	if s.bootstrap != nil && subtle.ConstantTimeCompare(h, s.bootstrap) == 1 {
		return true
	}
	now := s.now()
	s.mu.Lock()
	c, ok := s.cache[string(h)]
	s.mu.Unlock()
	return ok && now.Before(c.expires) && c.p != nil && (c.p.expires == nil || now.Before(*c.p.expires))
}

func (s *Store) lookup(ctx context.Context, h []byte, now time.Time) (*Principal, error) {
	var p Principal
	var expires, revoked *time.Time
	err := s.pool.QueryRow(ctx, qAPIKeyByHash, h).
		Scan(&p.KeyID, &p.Namespace, &p.Scopes, &expires, &revoked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrUnknownKey
	case err != nil:
		return nil, fmt.Errorf("authenticate: %w", err)
	case revoked != nil:
		return nil, ErrRevoked
	case expires != nil && !now.Before(*expires):
		return nil, ErrExpired
	}
	p.expires = expires
	return &p, nil
}

func (s *Store) forget() {
	s.mu.Lock()
	s.cache = map[string]cached{}
	s.mu.Unlock()
}

// KeyInfo describes a key without its secret.
// It is what KEY_CREATED recorded, and when the key was revoked.
type KeyInfo struct {
	domain.KeyCreated
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// NewKey is a request for a key.
type NewKey struct {
	Namespace string
	Name      string
	Scopes    []string
	// TTL, if positive, makes the key expire.
	TTL time.Duration
}

// Create makes a key and returns it (shown once) with its description.
// by is the principal creating it: it may only create keys of its own
// namespace with scopes it holds.
func (s *Store) Create(ctx context.Context, req NewKey, by *Principal, md domain.Metadata) (string, KeyInfo, error) {
	if req.Namespace == "" {
		req.Namespace = by.Namespace
	}
	if req.Namespace != AllNamespaces && !domain.ValidNamespace(req.Namespace) {
		return "", KeyInfo{}, &domain.FieldError{Field: "namespace", Message: "must be a namespace or *"}
	}
	if !by.Sees(req.Namespace) || (req.Namespace == AllNamespaces && by.Namespace != AllNamespaces) {
		return "", KeyInfo{}, &domain.FieldError{Field: "namespace", Message: "you can only create keys of your own namespace"}
	}
	if len(req.Scopes) == 0 {
		return "", KeyInfo{}, &domain.FieldError{Field: "scopes", Message: "must list at least one scope"}
	}
	for _, sc := range req.Scopes {
		if !ValidScope(sc) {
			return "", KeyInfo{}, &domain.FieldError{Field: "scopes", Message: fmt.Sprintf("unknown scope %q: use admin, jobs:read, jobs:approve, agents:read, agents:write, agents:lookup, agents:lookup:<capability pattern>, capabilities:read or jobs:submit:<capability pattern>", sc)}
		}
		if !by.Has(ScopeAdmin) && !by.Has(sc) {
			return "", KeyInfo{}, &domain.FieldError{Field: "scopes", Message: fmt.Sprintf("you cannot grant %q", sc)}
		}
	}
	if len(req.Name) > 128 {
		return "", KeyInfo{}, &domain.FieldError{Field: "name", Message: "must be at most 128 characters"}
	}
	idb := make([]byte, 6)
	_, _ = rand.Read(idb)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	info := KeyInfo{KeyCreated: domain.KeyCreated{KeyID: "key_" + hex.EncodeToString(idb), Namespace: req.Namespace, Name: req.Name,
		Scopes: req.Scopes, CreatedAt: s.now().UTC(), CreatedBy: md.Actor}}
	key := "ark_" + strings.TrimPrefix(info.KeyID, "key_") + "_" + base64.RawURLEncoding.EncodeToString(secret)
	if req.TTL > 0 {
		t := info.CreatedAt.Add(req.TTL)
		info.ExpiresAt = &t
	}
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.store.AppendTx(ctx, tx, "keys:"+req.Namespace, eventstore.Any, domain.NewEvent(domain.EventKeyCreated, info.KeyCreated, md)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, qInsertAPIKey, info.KeyID, info.Namespace, info.Name, hash(key), info.Scopes,
			info.CreatedAt, info.CreatedBy, info.ExpiresAt)
		return err
	})
	if err != nil {
		return "", KeyInfo{}, fmt.Errorf("create key: %w", err)
	}
	return key, info, nil
}

// Revoke ends a key at once (in this process; within two seconds in the
// others). by must see the key's namespace; otherwise it is domain.ErrNotFound.
func (s *Store) Revoke(ctx context.Context, keyID string, by *Principal, md domain.Metadata) error {
	err := s.store.RetryTx(ctx, func(tx pgx.Tx) error { // its append comes after its key's lock
		var ns string
		var revoked *time.Time
		err := tx.QueryRow(ctx, qLockAPIKey, keyID).Scan(&ns, &revoked)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !by.Sees(ns) {
			return fmt.Errorf("key %s: %w", keyID, domain.ErrNotFound)
		}
		if err != nil || revoked != nil {
			return err
		}
		if _, err := s.store.AppendTx(ctx, tx, "keys:"+ns, eventstore.Any,
			domain.NewEvent(domain.EventKeyRevoked, domain.KeyRevoked{KeyID: keyID}, md)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qRevokeAPIKey, keyID, s.now().UTC())
		return err
	})
	if err != nil {
		return err
	}
	s.forget()
	return nil
}

// List returns the keys of the namespaces by sees.
func (s *Store) List(ctx context.Context, by *Principal) ([]KeyInfo, error) {
	rows, err := s.pool.Query(ctx, qListAPIKeys, by.Namespace)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyInfo, error) {
		var k KeyInfo
		err := r.Scan(&k.KeyID, &k.Namespace, &k.Name, &k.Scopes, &k.CreatedAt, &k.CreatedBy, &k.ExpiresAt, &k.RevokedAt)
		return k, err
	})
}
