// Package retention keeps the database bounded: a finished job's history
// is kept for its namespace's period, then its partition of the log is
// archived (when an archive is configured) and dropped whole, with the
// rows the job left in the read models. Nothing is deleted from the log
// row by row.
package retention

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	arsql "github.com/agentreach/agentreach/sql"
	"github.com/agentreach/agentreach/sql/queries"
	"github.com/agentreach/agentreach/sweep"
)

var (
	qRetentionPolicyOf     = queries.Must("RetentionPolicyOf")
	qLockRetentionPolicy   = queries.Must("LockRetentionPolicy")
	qUpsertRetentionPolicy = queries.Must("UpsertRetentionPolicy")
	qPartitionJobs         = queries.Must("PartitionJobs")
	qDeletePartitionJobs   = queries.Must("DeletePartitionJobs")
	qPruneBeyondRetention  = queries.Must("PruneBeyondRetention")
	qDatabaseIdentity      = queries.Must("DatabaseIdentity")
	qRollUpAgentFigures    = queries.Must("RollUpAgentFigures")
)

// Defaults of what Config leaves zero.
const (
	// DefaultSnapshotEvery is how often the read models are snapshot when
	// nothing else asks: a rebuild then folds at most this much of the log.
	DefaultSnapshotEvery = 6 * time.Hour
	// DefaultMinuteFigures is how long per-minute agent figures are kept:
	// the windows past an hour read the per-hour ones.
	DefaultMinuteFigures = 24 * time.Hour
	// DefaultHourFigures is how long per-hour agent figures are kept
	// before they are summed into per-day ones.
	DefaultHourFigures = 30 * 24 * time.Hour
)

// Config is the deployment's retention.
type Config struct {
	// Period is how long a finished job's history is kept at least
	// (domain.DefaultRetention); a namespace may ask for less.
	Period time.Duration
	// PartitionWidth is the span of submit times a partition of the log
	// holds (domain.DefaultPartitionWidth): how late past its period a
	// job's history may go.
	PartitionWidth time.Duration
	// Every is how often the sweep looks (a minute, or the width if less).
	Every time.Duration
	// ArchiveDir, when set, is where each partition is written before it
	// is dropped.
	ArchiveDir string
	// SnapshotEvery is how often the read models are snapshot
	// (DefaultSnapshotEvery; negative: only before a partition drops).
	SnapshotEvery time.Duration
	// MinuteFigures and HourFigures are how long the per-minute and the
	// per-hour agent figures are kept (DefaultMinuteFigures,
	// DefaultHourFigures); the per-hour ones are then summed into days.
	MinuteFigures, HourFigures time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Validate refuses a configuration that cannot be what its operator
// meant, rather than replacing it: a period under the least a namespace
// may ask for, a partition narrower than a minute or not of whole
// minutes. Zero fields take their defaults.
func (c Config) Validate() error {
	switch {
	case c.Period < 0 || c.Period > 0 && c.Period < domain.MinRetention:
		return fmt.Errorf("--retention %s: at least %s (0: the default, %s)", c.Period, domain.MinRetention, domain.DefaultRetention)
	case c.PartitionWidth < 0 || c.PartitionWidth > 0 && (c.PartitionWidth < domain.MinPartitionWidth || c.PartitionWidth%time.Minute != 0):
		return fmt.Errorf("--partition-width %s: whole minutes, at least %s (0: the default, %s)", c.PartitionWidth, domain.MinPartitionWidth, domain.DefaultPartitionWidth)
	case c.MinuteFigures < 0 || c.MinuteFigures > 0 && c.MinuteFigures < 2*time.Hour:
		return fmt.Errorf("--minute-figures-kept %s: at least 2h, beyond the longest window that reads them (0: the default, %s)", c.MinuteFigures, DefaultMinuteFigures)
	case c.HourFigures < 0 || c.HourFigures > 0 && c.HourFigures < 48*time.Hour:
		return fmt.Errorf("--hour-figures-kept %s: at least 48h, beyond the longest window that reads them (0: the default, %s)", c.HourFigures, DefaultHourFigures)
	case c.SnapshotEvery > 0 && c.SnapshotEvery < time.Minute:
		return fmt.Errorf("--snapshot-every %s: at least 1m (0: the default, %s; negative: only before retention drops part of the log)", c.SnapshotEvery, DefaultSnapshotEvery)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Period <= 0 {
		c.Period = domain.DefaultRetention
	}
	if c.PartitionWidth <= 0 {
		c.PartitionWidth = domain.DefaultPartitionWidth
	}
	c.PartitionWidth = max(c.PartitionWidth, domain.MinPartitionWidth)
	if c.Every <= 0 {
		c.Every = min(time.Minute, c.PartitionWidth)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.MinuteFigures <= 0 {
		c.MinuteFigures = DefaultMinuteFigures
	}
	if c.HourFigures <= 0 {
		c.HourFigures = DefaultHourFigures
	}
	return c
}

// Service applies retention.
type Service struct {
	pool      *pgxpool.Pool
	store     *eventstore.Store
	projector *eventstore.Projector
	logger    *slog.Logger
	cfg       Config
	// held is the partition the sweep last said holds the log back, and
	// why: said again only when either changes.
	held string
	// direct says of each partition looked at whether it holds direct
	// calls' reports (fixed once no report can be born in it).
	direct map[string]bool
}

// New returns the retention of the deployment configured by cfg. The
// projector's projections are snapshot before the log loses what they
// folded.
func New(pool *pgxpool.Pool, store *eventstore.Store, projector *eventstore.Projector, logger *slog.Logger, cfg Config) *Service {
	return &Service{pool: pool, store: store, projector: projector, logger: logger, cfg: cfg.withDefaults(), direct: map[string]bool{}}
}

// Config is the configuration in force, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// Sweeps is the retention sweep, run by the leading process. A run may
// write a day of the log to the archive: it has an hour.
func (s *Service) Sweeps() []sweep.Sweep {
	return []sweep.Sweep{{Name: "retention_sweep", Every: s.cfg.Every, Timeout: time.Hour, Run: func(ctx context.Context) error {
		_, err := s.Sweep(ctx)
		return err
	}}}
}

// Report is what one sweep did.
type Report struct {
	// Made are the partitions made ahead of need; Dropped those that went.
	Made, Dropped []string
	// Kept are the partitions detached to be dropped and put back: a job
	// in them was found live once no write could reach them.
	Kept []string
	// Jobs is how many jobs' rows went with them.
	Jobs int
	// Alerts and Lookups are how many alerts and lookups past their
	// period went; Minutes how many per-minute agent figures past theirs,
	// and Hours how many per-hour ones were summed into days.
	Alerts, Lookups, Minutes, Hours int
	// Snapshots are the projections snapshot.
	Snapshots []string
}

// Sweep makes the partitions the next submits need, prunes what
// summarises history past its period, then drops every partition whose
// jobs are all past their period, oldest first.
func (s *Service) Sweep(ctx context.Context) (Report, error) {
	var rep Report
	now := s.cfg.Now()
	made, err := arsql.EnsureEventPartitions(ctx, s.pool, now, s.cfg.PartitionWidth)
	rep.Made = made
	if err != nil {
		return rep, err
	}
	// Both write the snapshot tables too: not while a snapshot is taken.
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := eventstore.LockSnapshots(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, qPruneBeyondRetention, now, int64(s.cfg.Period.Seconds())).Scan(&rep.Alerts, &rep.Lookups)
		if err != nil {
			return fmt.Errorf("prune past retention: %w", err)
		}
		err = tx.QueryRow(ctx, qRollUpAgentFigures, now.Add(-s.cfg.MinuteFigures), now.Add(-s.cfg.HourFigures)).Scan(&rep.Minutes, &rep.Hours)
		if err != nil {
			return fmt.Errorf("roll up agent figures: %w", err)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if rep.Minutes+rep.Hours > 0 {
		s.logger.InfoContext(ctx, "agent figures rolled up", "minutes_dropped", rep.Minutes, "hours_into_days", rep.Hours)
	}
	if err := s.snapshotWhenDue(ctx, &rep); err != nil {
		return rep, err
	}
	parts, err := arsql.EventPartitions(ctx, s.pool)
	if err != nil {
		return rep, err
	}
	for _, p := range parts {
		if p.DroppedAt != nil {
			continue
		}
		if p.DroppingAt == nil {
			ok, err := s.droppable(ctx, "events", p, now)
			if err != nil || !ok {
				return rep, err // partitions go in order: a later one waits for this
			}
			if err := s.snapshotBefore(ctx, p, &rep); err != nil {
				return rep, err
			}
			if err := arsql.MarkPartitionDropping(ctx, s.pool, p.Name); err != nil {
				return rep, err
			}
		}
		n, archived, dropped, err := s.drop(ctx, p, now)
		if err != nil {
			return rep, err
		}
		if !dropped {
			rep.Kept = append(rep.Kept, p.Name)
			return rep, nil
		}
		rep.Dropped, rep.Jobs = append(rep.Dropped, p.Name), rep.Jobs+n
		delete(s.direct, p.Name)
		s.logger.InfoContext(ctx, "retention dropped a partition of the log", "partition", p.Name,
			"from", p.Low, "to", p.High, "jobs", n, "archived_to", archived)
	}
	return rep, nil
}

// snapshotWhenDue snapshots every projection when the oldest of their
// snapshots is SnapshotEvery old, by the database's clock (which stamps
// them).
func (s *Service) snapshotWhenDue(ctx context.Context, rep *Report) error {
	if s.cfg.SnapshotEvery < 0 {
		return nil
	}
	for _, proj := range s.projector.Projections() {
		snap, ok, err := s.projector.LatestSnapshot(ctx, proj.Name())
		if err != nil {
			return err
		}
		if !ok || snap.Age >= s.cfg.SnapshotEvery {
			return s.snapshot(ctx, rep)
		}
	}
	return nil
}

// snapshotBefore makes sure that the snapshots hold everything the
// projections folded from p, which droppable found folded, before p
// leaves the log: a rebuild from them then loses nothing p gave.
func (s *Service) snapshotBefore(ctx context.Context, p arsql.EventPartition, rep *Report) error {
	covered, err := s.store.Covered(ctx, "events", p.TimeRange, s.names())
	if err != nil || covered {
		return err
	}
	if err := s.snapshot(ctx, rep); err != nil {
		return err
	}
	if covered, err = s.store.Covered(ctx, "events", p.TimeRange, s.names()); err != nil || covered {
		return err
	}
	return fmt.Errorf("retention of partition %s: the snapshots do not cover it", p.Name)
}

func (s *Service) snapshot(ctx context.Context, rep *Report) error {
	for _, proj := range s.projector.Projections() {
		snap, err := s.projector.TakeSnapshot(ctx, proj)
		if err != nil {
			return err
		}
		rep.Snapshots = append(rep.Snapshots, proj.Name())
		s.logger.InfoContext(ctx, "snapshot of a read model taken", "projection", proj.Name(), "rows", snap.Rows, "events", snap.Events)
	}
	return nil
}

func (s *Service) names() []string {
	var names []string
	for _, proj := range s.projector.Projections() {
		names = append(names, proj.Name())
	}
	return names
}

// droppable decides from the jobs born in p, as table holds its events,
// whether it may go at now.
func (s *Service) droppable(ctx context.Context, table string, p arsql.EventPartition, now time.Time) (bool, error) {
	if p.High.Add(domain.PartitionSkew).After(now) {
		return false, nil // a job may still be born in it: no need to ask
	}
	// The jobs' rows are the projections': they say all only once every
	// projection has folded every event of the partition.
	folded, err := s.store.Folded(ctx, table, p.TimeRange)
	if err != nil || !folded {
		return false, err
	}
	var jobs domain.PartitionJobs
	var lastDue *time.Time
	err = s.pool.QueryRow(ctx, qPartitionJobs, idAt(p.Low), idAt(p.High), int64(s.cfg.Period.Seconds())).Scan(&jobs.Live, &lastDue)
	if err != nil {
		return false, fmt.Errorf("retention of partition %s: %w", p.Name, err)
	}
	if lastDue != nil {
		jobs.LastDue = *lastDue
	}
	if domain.PartitionDroppable(p.TimeRange, jobs, now) {
		// Direct calls' reports in it are kept the deployment's period
		// past its end (their namespace's own is not looked up).
		direct, err := s.holdsDirect(ctx, table, p)
		if err != nil {
			return false, err
		}
		if due := p.High.Add(s.cfg.Period); direct && due.After(jobs.LastDue) {
			jobs.LastDue = due
		}
	}
	if table == "events" {
		s.sayHeld(ctx, p, domain.PartitionHeld(p.TimeRange, jobs, s.cfg.Period, now))
	}
	return domain.PartitionDroppable(p.TimeRange, jobs, now), nil
}

// holdsDirect says whether partition p, as table holds it, holds direct
// calls' reports: read once a partition (no report is born in it past its
// end), since the answer scans it when it holds none.
func (s *Service) holdsDirect(ctx context.Context, table string, p arsql.EventPartition) (bool, error) {
	if held, ok := s.direct[p.Name]; ok {
		return held, nil
	}
	held, err := s.store.HoldsStreams(ctx, table, p.TimeRange, domain.DirectStreamPrefix)
	if err != nil {
		return false, err
	}
	s.direct[p.Name] = held
	return held, nil
}

// sayHeld logs, once, that partition p holds the log back for why (its
// period is long past), so that an operator sees what retention waits for.
func (s *Service) sayHeld(ctx context.Context, p arsql.EventPartition, why string) {
	if why == "" || s.held == p.Name+why {
		return
	}
	s.held = p.Name + why
	s.logger.WarnContext(ctx, "retention holds a partition of the log past its period: the partitions after it wait too",
		"partition", p.Name, "from", p.Low, "to", p.High, "why", why)
}

// drop takes p, found droppable and marked so, out of the log: detached
// first, so that no write reaches it any more, then checked again (a
// submit or an outcome may have come between the check and the detach:
// then it is attached again and stays), archived when an archive is
// configured, its jobs' rows deleted, its table dropped. Each step may run
// again after a crash.
func (s *Service) drop(ctx context.Context, p arsql.EventPartition, now time.Time) (jobs int, archived string, dropped bool, err error) {
	if err := arsql.DetachEventPartition(ctx, s.pool, p.Name); err != nil {
		return 0, "", false, err
	}
	exists, err := arsql.PartitionTableExists(ctx, s.pool, p.Name)
	if err != nil {
		return 0, "", false, err
	}
	archived = p.ArchivedTo
	if exists {
		ok, err := s.droppable(ctx, p.Name, p, now)
		if err != nil {
			return 0, "", false, err
		}
		if !ok {
			s.logger.WarnContext(ctx, "retention put a partition of the log back: a job in it came to life before it was detached",
				"partition", p.Name)
			return 0, "", false, arsql.ReattachEventPartition(ctx, s.pool, p)
		}
		// Its positions first: from the detach on, a reader resuming at
		// one of them is told it was dropped.
		held, first, last, err := s.store.Held(ctx, p.Name, p.TimeRange)
		if err != nil {
			return 0, "", false, err
		}
		if held > 0 {
			if err := arsql.MarkPartitionPositions(ctx, s.pool, p.Name, first, last); err != nil {
				return 0, "", false, err
			}
		}
		if s.cfg.ArchiveDir != "" {
			if archived, err = s.archive(ctx, p); err != nil {
				return 0, "", false, err
			}
		}
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := eventstore.LockSnapshots(ctx, tx); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, qDeletePartitionJobs, idAt(p.Low), idAt(p.High)).Scan(&jobs); err != nil {
				return fmt.Errorf("retention of partition %s: delete its jobs' rows: %w", p.Name, err)
			}
			if archived == "" {
				return nil
			}
			return arsql.MarkPartitionArchived(ctx, tx, p.Name, archived)
		})
		if err != nil {
			return 0, "", false, err
		}
	}
	return jobs, archived, true, arsql.DropEventPartition(ctx, s.pool, p.Name)
}

// idAt is the least UUIDv7 of the millisecond t: ids of jobs submitted at
// or after t compare at or above it.
func idAt(t time.Time) string {
	var u uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[:6], ms[2:])
	u[6] = 0x70 // version 7
	return u.String()
}

// policy is namespace ns's retention with no period of its own.
func (s *Service) policy(ns string) domain.RetentionPolicy {
	return domain.RetentionPolicy{Namespace: ns, Deployment: s.cfg.Period, PartitionWidth: s.cfg.PartitionWidth, ArchiveTo: s.cfg.ArchiveDir}
}

// PolicyOf is namespace ns's retention.
func (s *Service) PolicyOf(ctx context.Context, ns string) (domain.RetentionPolicy, error) {
	p := s.policy(ns)
	var own int64
	err := s.pool.QueryRow(ctx, qRetentionPolicyOf, ns).Scan(&own, &p.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	p.Own = time.Duration(own) * time.Second
	return p, err
}

// SetPolicy sets namespace ns's own period (0 gives it up), recording the
// change on the namespace's policy stream.
func (s *Service) SetPolicy(ctx context.Context, ns string, own time.Duration, md domain.Metadata) (domain.RetentionPolicy, error) {
	if err := domain.ValidateRetention(own, s.cfg.Period); err != nil {
		return domain.RetentionPolicy{}, err
	}
	p := s.policy(ns)
	p.Own = own
	err := s.store.InTx(ctx, func(tx pgx.Tx) error {
		var prev, version int64
		err := tx.QueryRow(ctx, qLockRetentionPolicy, ns).Scan(&prev, &version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		p.Version = int(version) + 1
		secs := int64(own / time.Second)
		if _, err := s.store.AppendTx(ctx, tx, domain.RetentionStream(ns), eventstore.Any, domain.NewEvent(domain.EventRetentionPolicyChanged,
			domain.RetentionPolicyChanged{Namespace: ns, FromSeconds: prev, ToSeconds: secs}, md)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qUpsertRetentionPolicy, ns, secs, p.Version)
		return err
	})
	return p, err
}
