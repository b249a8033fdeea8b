package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
)

// Cursor is a place in the global log: the (transaction id, position) of
// the last event read. The zero Cursor is the start of the log.
//
// The log's order is (transaction id, position), not position alone:
// positions are handed out when an event is inserted, but transactions
// commit in another order, so a reader that went by position alone would
// skip an event whose transaction committed after a later position was
// read. Reading only below pg_snapshot_xmin and in transaction id order
// closes that gap without a global lock on append.
type Cursor struct {
	TxID     uint64
	Position int64
}

// ReadAll returns up to limit events after cursor, in log order, from
// transactions that have all finished: an event that commits later is
// still after the cursor and is read then, exactly once.
func (s *Store) ReadAll(ctx context.Context, q Querier, after Cursor, limit int) ([]Record, error) {
	recs, _, err := s.readAllWithin(ctx, q, after, limit, 0)
	return recs, err
}

// readAllWithin is ReadAll that also stops once the events' data reach
// maxBytes (0: no bound; at least one event is read), and reports whether
// it stopped there.
func (s *Store) readAllWithin(ctx context.Context, q Querier, after Cursor, limit, maxBytes int) ([]Record, bool, error) {
	if q == nil {
		q = s.pool
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.Query(ctx, `
		SELECT `+recordColumns+`
		FROM events
		WHERE (tx_id, position) > ($1::text::xid8, $2)
		  AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY tx_id, position
		LIMIT $3`, strconv.FormatUint(after.TxID, 10), after.Position, limit)
	if err != nil {
		return nil, false, fmt.Errorf("read log after %d: %w", after.Position, err)
	}
	recs, capped, err := scanRecordsWithin(rows, maxBytes)
	if err != nil {
		return nil, false, fmt.Errorf("read log after %d: %w", after.Position, err)
	}
	return recs, capped, nil
}

// CursorAt returns the cursor just after the event at position, so that
// clients can resume with the position of the last event they received.
// Position 0 is the start of the log; an unknown position is domain.ErrNotFound.
func (s *Store) CursorAt(ctx context.Context, position int64) (Cursor, error) {
	if position == 0 {
		return Cursor{}, nil
	}
	var txid string
	err := s.pool.QueryRow(ctx, `SELECT tx_id::text FROM events WHERE position = $1`, position).Scan(&txid)
	if errors.Is(err, pgx.ErrNoRows) {
		var dropped bool
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM event_partitions
			WHERE dropped_at IS NOT NULL AND $1 BETWEEN first_position AND last_position)`, position).Scan(&dropped)
		if err == nil && dropped {
			return Cursor{}, fmt.Errorf("cursor at position %d: %w", position, ErrDropped)
		}
		if err == nil {
			err = domain.ErrNotFound
		}
		return Cursor{}, fmt.Errorf("cursor at position %d: %w", position, err)
	}
	if err != nil {
		return Cursor{}, fmt.Errorf("cursor at position %d: %w", position, err)
	}
	id, _ := strconv.ParseUint(txid, 10, 64)
	return Cursor{TxID: id, Position: position}, nil
}

// ErrDropped is a position whose event retention dropped with its
// partition of the log.
var ErrDropped = errors.New("the event at this position was dropped with its partition of the log, past its retention period")

// NotifyChannel is the PostgreSQL channel on which commits are announced.
const NotifyChannel = "agentreach_events"

// RunNotifier turns Committed calls into NOTIFYs on NotifyChannel until ctx
// ends. The NOTIFY is sent after the commit and outside the appending
// transaction, because a NOTIFY inside it would serialise every commit on
// PostgreSQL's notification queue lock; bursts collapse into one message.
func (s *Store) RunNotifier(ctx context.Context, logger *slog.Logger) {
	Notify(ctx, s.pool, NotifyChannel, s.pokes, logger)
}

// Subscribe returns a channel that receives a signal soon after events are
// committed, by this process or another (RunListener must be running), and
// a function that ends the subscription. Signals are coalesced: a reader
// should read the log until it is empty after each one.
func (s *Store) Subscribe() (<-chan struct{}, func()) { return s.subscribe(false) }

// SubscribeCommits is Subscribe, and also signalled at once by this
// process's own commits (Committed), without the notification's round
// trip and its coalescing: for a reader that asks little of each signal.
func (s *Store) SubscribeCommits() (<-chan struct{}, func()) { return s.subscribe(true) }

func (s *Store) subscribe(local bool) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.subMu.Lock()
	s.subs[ch] = local
	s.subMu.Unlock()
	return ch, func() {
		s.subMu.Lock()
		delete(s.subs, ch)
		s.subMu.Unlock()
	}
}

// broadcast signals every subscriber: a notification came.
func (s *Store) broadcast() { s.signal(false) }

// signal signals the subscribers: only those of local commits when
// onlyLocal.
func (s *Store) signal(onlyLocal bool) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for ch, local := range s.subs {
		if onlyLocal && !local {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// RunListener LISTENs for commits on NotifyChannel and signals every
// subscriber, until ctx ends.
func (s *Store) RunListener(ctx context.Context, logger *slog.Logger) {
	Listen(ctx, s.pool, NotifyChannel, logger, func(context.Context) (time.Duration, error) {
		s.broadcast()
		return 0, nil
	})
}
