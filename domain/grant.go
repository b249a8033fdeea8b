package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
)

// Lookup mode: a caller asks for the ranked candidates of a capability
// (POST /v1/lookup) and calls the best one itself, with an invocation
// grant the agent verifies, then reports what happened (POST /v1/reports).

// Lookup limits and lifetimes.
const (
	// LookupTTL is how long a caller may cache a lookup's candidates.
	LookupTTL = 30 * time.Second
	// GrantTTL is how long an invocation grant is good for.
	GrantTTL = 5 * time.Minute
	// ReportWindow is how long after a lookup the caller may report on the
	// agents it was given, and how old a report's time may be.
	ReportWindow = 10 * time.Minute
	// DefaultLookupLimit and MaxLookupLimit bound a lookup's candidates.
	DefaultLookupLimit = 3
	MaxLookupLimit     = 20
	// MaxReports bounds one batch of outcome reports.
	MaxReports = 1000
)

// Grant is what an invocation grant says: that the caller holding API key
// KeyID looked up agent Agent of namespace Namespace for Capability, good
// until Expires (unix seconds).
type Grant struct {
	Namespace  string `json:"ns"`
	Agent      string `json:"agent"`
	Capability string `json:"cap"`
	KeyID      string `json:"key"`
	IssuedAt   int64  `json:"iat"`
	Expires    int64  `json:"exp"`
}

// grantPrefix starts every grant; the version of the format.
const grantPrefix = "v1."

// SignGrant encodes g as a grant: "v1." + base64url(JSON of g), then one
// "." + base64url(HMAC-SHA256(key, "v1." + base64url(JSON))) per key. The
// keys are the agent's delivery signing keys (the SHA-256 of its token,
// and of its previous one during a rotation's overlap), so the agent
// verifies a grant with what it already holds and no other agent can.
func SignGrant(g Grant, keys ...[]byte) string {
	b, _ := json.Marshal(g)
	signed := grantPrefix + base64.RawURLEncoding.EncodeToString(b)
	out := signed
	for _, k := range keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(signed))
		out += "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	return out
}

// ErrBadGrant: an invocation grant that is malformed, signed with another
// key, for another agent or capability, or expired.
var ErrBadGrant = NewError(ErrUnauthenticated, "invalid invocation grant")

// VerifyGrant checks grant against key (the SHA-256 of the agent's token)
// for agent id and capability at now: a signature by key, the agent and
// capability it names, and an expiry after now. An empty capability
// accepts any.
func VerifyGrant(grant string, key []byte, agentID, capability string, now time.Time) (Grant, error) {
	parts := strings.Split(grant, ".")
	if len(parts) < 3 || parts[0]+"." != grantPrefix {
		return Grant{}, errors.Join(ErrBadGrant, errors.New("not a v1 grant"))
	}
	signed := grantPrefix + parts[1]
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	want := mac.Sum(nil)
	if !slices.ContainsFunc(parts[2:], func(sig string) bool {
		got, err := base64.RawURLEncoding.DecodeString(sig)
		return err == nil && hmac.Equal(got, want)
	}) {
		return Grant{}, errors.Join(ErrBadGrant, errors.New("not signed for this agent"))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var g Grant
	if err != nil || json.Unmarshal(raw, &g) != nil {
		return Grant{}, errors.Join(ErrBadGrant, errors.New("unreadable"))
	}
	switch {
	case g.Agent != agentID:
		return g, errors.Join(ErrBadGrant, errors.New("for another agent"))
	case capability != "" && g.Capability != capability:
		return g, errors.Join(ErrBadGrant, errors.New("for another capability"))
	case now.Unix() >= g.Expires:
		return g, errors.Join(ErrBadGrant, errors.New("expired"))
	}
	return g, nil
}
