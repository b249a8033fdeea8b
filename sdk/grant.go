package sdk

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// GrantHeader carries an invocation grant on a direct call: a caller that
// looked the agent up (POST /v1/lookup) calls it itself and shows the
// grant Agent-Reach gave it.
const GrantHeader = "X-Reach-Grant"

// Grant is what an invocation grant says: the caller holding API key KeyID
// looked up agent Agent of Namespace for Capability; good until Expires
// (unix seconds).
type Grant struct {
	Namespace  string `json:"ns"`
	Agent      string `json:"agent"`
	Capability string `json:"cap"`
	KeyID      string `json:"key"`
	IssuedAt   int64  `json:"iat"`
	Expires    int64  `json:"exp"`
}

// ErrBadGrant is returned by VerifyGrant for a grant that is malformed,
// not signed for this agent, for another agent or capability, or expired.
var ErrBadGrant = errors.New("sdk: invalid invocation grant")

// VerifyGrant checks an invocation grant ("v1.<base64url JSON>.<sig>…",
// each signature an HMAC-SHA256 of "v1.<base64url JSON>" keyed with the
// SHA-256 of an agent token) against this agent's token, id and the
// capability called (empty: any), at now.
func VerifyGrant(token, grant, agentID, capability string, now time.Time) (Grant, error) {
	parts := strings.Split(grant, ".")
	if len(parts) < 3 || parts[0] != "v1" {
		return Grant{}, fmt.Errorf("%w: not a v1 grant", ErrBadGrant)
	}
	key := sha256.Sum256([]byte(token))
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte("v1." + parts[1]))
	want := mac.Sum(nil)
	signed := false
	for _, sig := range parts[2:] {
		if got, err := base64.RawURLEncoding.DecodeString(sig); err == nil && hmac.Equal(got, want) {
			signed = true
		}
	}
	if !signed {
		return Grant{}, fmt.Errorf("%w: not signed for this agent", ErrBadGrant)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var g Grant
	if err != nil || json.Unmarshal(raw, &g) != nil {
		return Grant{}, fmt.Errorf("%w: unreadable", ErrBadGrant)
	}
	switch {
	case g.Agent != agentID:
		return g, fmt.Errorf("%w: for agent %s", ErrBadGrant, g.Agent)
	case capability != "" && g.Capability != capability:
		return g, fmt.Errorf("%w: for capability %s", ErrBadGrant, g.Capability)
	case now.Unix() >= g.Expires:
		return g, fmt.Errorf("%w: expired", ErrBadGrant)
	}
	return g, nil
}
