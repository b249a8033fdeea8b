package domain

import (
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGrant: a grant verifies only with the key it was signed with, for
// the agent and capability it names, before it expires; a rotation's two
// keys both verify.
func TestGrant(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	keyA, keyB, keyOld := sha256.Sum256([]byte("art_a")), sha256.Sum256([]byte("art_b")), sha256.Sum256([]byte("art_old"))
	g := Grant{Namespace: "default", Agent: "a", Capability: "calc.add", KeyID: "k1", IssuedAt: now.Unix(), Expires: now.Add(GrantTTL).Unix()}
	grant := SignGrant(g, keyA[:], keyOld[:])
	for _, tc := range []struct {
		name       string
		grant      string
		key        []byte
		agent, cap string
		at         time.Time
		ok         bool
	}{
		{"good", grant, keyA[:], "a", "calc.add", now, true},
		{"the previous key of a rotation", grant, keyOld[:], "a", "calc.add", now, true},
		{"any capability", grant, keyA[:], "a", "", now, true},
		{"agent B's key", grant, keyB[:], "a", "calc.add", now, false},
		{"presented to agent B", SignGrant(g, keyB[:]), keyB[:], "b", "calc.add", now, false},
		{"another capability", grant, keyA[:], "a", "calc.mul", now, false},
		{"expired", grant, keyA[:], "a", "calc.add", now.Add(GrantTTL), false},
		{"tampered", strings.Replace(grant, ".", ".e30", 1), keyA[:], "a", "calc.add", now, false},
		{"unsigned", "v1." + "e30", keyA[:], "a", "calc.add", now, false},
		{"garbage", "hello", keyA[:], "a", "calc.add", now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := VerifyGrant(tc.grant, tc.key, tc.agent, tc.cap, tc.at)
			if !tc.ok {
				require.ErrorIs(t, err, ErrBadGrant)
				return
			}
			require.NoError(t, err)
			require.Equal(t, g, got)
		})
	}
}
