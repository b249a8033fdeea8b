package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestApplyPatch(t *testing.T) {
	t.Parallel()
	base := domain.AgentRegistration{AgentID: "a1", Capabilities: []string{"c"}, Endpoint: "http://127.0.0.1:9/",
		Weight: 50, RolloutPercent: 100, MaxConcurrent: 4, Aliases: []string{"x"}}
	require.NoError(t, base.Normalize())
	i := func(n int) *int { return &n }
	list := func(s ...string) *[]string { return &s }
	for _, tc := range []struct {
		name   string
		patch  domain.AgentPatch
		fields []string
		field  string // the field of a refusal
	}{
		{"nothing", domain.AgentPatch{}, nil, ""},
		{"the same weight", domain.AgentPatch{Weight: i(50)}, nil, ""},
		{"weight", domain.AgentPatch{Weight: i(80)}, []string{"weight"}, ""},
		{"several", domain.AgentPatch{RolloutPercent: i(5), MaxConcurrent: i(2), Aliases: list("x", "y")},
			[]string{"rollout_percent", "max_concurrent", "aliases"}, ""},
		{"aliases emptied", domain.AgentPatch{Aliases: list()}, []string{"aliases"}, ""},
		{"context", domain.AgentPatch{Context: &map[string]any{"accepting": false}}, []string{"context"}, ""},
		{"weight 0", domain.AgentPatch{Weight: i(0)}, nil, "weight"},
		{"weight 101", domain.AgentPatch{Weight: i(101)}, nil, "weight"},
		{"rollout 101", domain.AgentPatch{RolloutPercent: i(101)}, nil, "rollout_percent"},
		{"negative capacity", domain.AgentPatch{MaxConcurrent: i(-1)}, nil, "max_concurrent"},
		{"blank alias", domain.AgentPatch{Aliases: list(" ")}, nil, "aliases"},
	} {
		next, u, err := domain.ApplyPatch(base, tc.patch)
		if tc.field != "" {
			var fe *domain.FieldError
			require.ErrorAs(t, err, &fe, tc.name)
			require.Equal(t, tc.field, fe.Field, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.fields, u.Fields, tc.name)
		require.Equal(t, domain.SettingsOf(base), u.From, tc.name)
		require.Equal(t, domain.SettingsOf(next), u.To, tc.name)
	}
	// The patch never changes what it was applied to.
	_, _, _ = domain.ApplyPatch(base, domain.AgentPatch{Aliases: list("z")})
	require.Equal(t, []string{"x"}, base.Aliases)
}
