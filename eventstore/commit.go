package eventstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentreach/agentreach/domain"
)

const (
	// qCommitOutcome asks whether transaction $1 committed: committed,
	// aborted or in progress (NULL: too old to tell). On a server that
	// never saw it (a standby promoted before it arrived) it fails: it did
	// not commit there.
	qCommitOutcome = `SELECT pg_xact_status($1::text::xid8)`
	// qTxAppended asks whether transaction $1 appended events: what
	// qCommitOutcome said committed, checked in the log itself.
	qTxAppended = `SELECT EXISTS (SELECT 1 FROM events WHERE tx_id = $1::text::xid8)`
	// qTxOwn is, inside a transaction before its COMMIT, its id if it
	// wrote anything ('' if not) and whether it appended events.
	qTxOwn = `SELECT coalesce(x::text, ''), x IS NOT NULL AND EXISTS (SELECT 1 FROM events WHERE tx_id = x)
		FROM (SELECT pg_current_xact_id_if_assigned() AS x) AS t`
)

// CommitOutcome answers for a COMMIT of transaction xid that failed with
// err: nil if it committed all the same, err if PostgreSQL refused it (it
// did not), ErrAborted if the connection died before it did, and
// ErrCommitUnknown if that cannot be found out within CommitOutcomeWait.
// A connection that dies during COMMIT leaves the client not knowing
// which; PostgreSQL keeps each transaction's fate, and any connection,
// on this primary or the one that replaced it, can ask.
func CommitOutcome(ctx context.Context, q Querier, xid string, appended bool, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "08") && !strings.HasPrefix(pgErr.Code, "57P") || xid == "" {
		return err // the server refused it: it did not commit
	}
	if ctx.Err() != nil && pgconn.SafeToRetry(err) {
		return err // the caller's context ended before the COMMIT was sent: it did not commit
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CommitOutcomeWait)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var status *string
		qerr := q.QueryRow(ctx, qCommitOutcome, xid).Scan(&status)
		switch {
		case qerr == nil && status != nil && *status == "committed":
			// A standby promoted since may have given the id to another
			// transaction: the log says whether this one's events are there.
			if appended {
				var there bool
				if qerr = q.QueryRow(ctx, qTxAppended, xid).Scan(&there); qerr == nil && !there {
					return ErrAborted
				}
			}
			if qerr == nil {
				return nil
			}
		case qerr == nil && status != nil && *status == "aborted":
			return ErrAborted
		case errors.As(qerr, &pgErr) && pgErr.Code == "22023": // a transaction id in the future: this server never saw it
			return ErrAborted
		}
		t := time.NewTimer(wait) // in progress, or the database out of reach: ask again
		select {
		case <-ctx.Done():
			t.Stop()
			return ErrCommitUnknown
		case <-t.C:
		}
	}
}

// CommitOutcomeWait bounds how long a write whose COMMIT lost its
// connection waits to find out whether it committed.
const CommitOutcomeWait = 30 * time.Second

// ErrAborted says a transaction whose COMMIT lost its connection did not
// commit: its writes may run again.
var ErrAborted error = &domain.KindError{Kind: domain.ErrUnavailable, Code: "unavailable",
	Message: "the transaction did not commit (its connection was lost during COMMIT): try again"}

// ErrCommitUnknown says the connection died during a transaction's COMMIT
// and whether it committed could not be found out (the database stayed
// out of reach, or a standby promoted since never saw it): a caller may
// retry, with the same Idempotency-Key for a submit.
var ErrCommitUnknown error = &domain.KindError{Kind: domain.ErrUnavailable, Code: "unavailable",
	Message: "the connection to the database was lost while committing, and whether it committed could not be found out: try again"}
