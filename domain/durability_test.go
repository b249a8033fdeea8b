package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

func TestReplicationDurable(t *testing.T) {
	t.Parallel()
	sync := "ANY 1 (pgautofailover_standby_2)"
	for _, tc := range []struct {
		name string
		r    domain.Replication
		want bool
		why  string
	}{
		{name: "a synchronous standby streams", r: domain.Replication{SyncNames: sync, Standbys: 1, SyncStandbys: 1}, want: true},
		{name: "a lone server", r: domain.Replication{}, why: "synchronous_standby_names is empty"},
		{name: "wait_primary: the standby is gone and the setting emptied", r: domain.Replication{Standbys: 0}, why: "synchronous_standby_names is empty"},
		{name: "the setting stays but no standby streams", r: domain.Replication{SyncNames: sync}, why: "no synchronous standby"},
		{name: "an asynchronous standby only", r: domain.Replication{SyncNames: sync, Standbys: 1}, why: "no synchronous standby"},
		{name: "a standby answered", r: domain.Replication{InRecovery: true, SyncNames: sync, SyncStandbys: 1}, why: "is a standby"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ok, why := tc.r.Durable()
			require.Equal(t, tc.want, ok)
			if tc.want {
				require.Empty(t, why)
			} else {
				require.Contains(t, why, tc.why)
			}
		})
	}
}
