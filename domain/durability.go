package domain

import "time"

// Replication is what a primary says of its standbys, read every second
// (pg_stat_replication and its settings).
type Replication struct {
	// InRecovery: the server answering is a standby, not a primary.
	InRecovery bool
	// SyncNames is synchronous_standby_names: empty, commits wait for no
	// standby (pg_auto_failover's wait_primary, or a lone server).
	SyncNames string
	// Standbys stream from it; SyncStandbys of them are synchronous
	// (sync_state sync or quorum).
	Standbys, SyncStandbys int
	// ReplayLag is the largest replay lag among its standbys.
	ReplayLag time.Duration
}

// Durable says whether a commit the primary acknowledges now is on two
// nodes, so that no failover can erase it, and why not when it is not.
func (r Replication) Durable() (bool, string) {
	switch {
	case r.InRecovery:
		return false, "the database is a standby: it takes no writes"
	case r.SyncNames == "":
		return false, "the primary's synchronous_standby_names is empty: its commits wait for no standby"
	case r.SyncStandbys == 0:
		return false, "no synchronous standby of the primary is streaming"
	}
	return true, ""
}
