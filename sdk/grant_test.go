package sdk_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/sdk"
)

// TestVerifyGrant: the SDK reads the grants the service signs
// (domain.SignGrant): its own agent's, for the capability called, before
// they expire.
func TestVerifyGrant(t *testing.T) {
	t.Parallel()
	now := time.Now()
	key := sha256.Sum256([]byte("art_a"))
	grant := domain.SignGrant(domain.Grant{Namespace: "default", Agent: "a", Capability: "c", KeyID: "k", IssuedAt: now.Unix(),
		Expires: now.Add(time.Minute).Unix()}, key[:])
	g, err := sdk.VerifyGrant("art_a", grant, "a", "c", now)
	require.NoError(t, err)
	require.Equal(t, "k", g.KeyID)
	for name, f := range map[string]func() error{
		"another agent's token": func() error { _, err := sdk.VerifyGrant("art_b", grant, "a", "c", now); return err },
		"another agent":         func() error { _, err := sdk.VerifyGrant("art_a", grant, "b", "c", now); return err },
		"another capability":    func() error { _, err := sdk.VerifyGrant("art_a", grant, "a", "d", now); return err },
		"expired":               func() error { _, err := sdk.VerifyGrant("art_a", grant, "a", "c", now.Add(time.Minute)); return err },
		"garbage":               func() error { _, err := sdk.VerifyGrant("art_a", "nope", "a", "c", now); return err },
	} {
		require.ErrorIs(t, f(), sdk.ErrBadGrant, name)
	}
}
