package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/projection"
	"github.com/agentreach/agentreach/retention"
	arsql "github.com/agentreach/agentreach/sql"
)

// The soak (--soak D): a steady load for D on a service whose default
// namespace keeps its history --soak-retention, in partitions of a
// minute, archived to a scratch folder; the database's size sampled as it
// runs. It should stop growing after the first retention period and a
// partition, and the archive should hold every dropped job exactly once.

// soakWidth is the partition width the soak runs with.
const soakWidth = time.Minute

// maxSoak is the longest soak: the bench's agents hold a lease of
// agentTTLSeconds and do not heartbeat.
const maxSoak = 55 * time.Minute

// soakSample is the state of the bench database at one moment.
type soakSample struct {
	at                 time.Duration // since the load began
	submitted, jobs    int64         // jobs submitted so far; rows in the jobs read model
	attached, dropped  int           // time partitions of the log
	bytes, eventsBytes int64         // the database's size; the log's
}

// soakArgs are the service's flags for a soak archiving to dir: a small
// pool (the load is steady and light), so that a long soak leaves room
// beside it on a server of 100 connections.
func soakArgs(dir string) []string {
	return []string{"--partition-width", soakWidth.String(), "--archive-dir", dir, "--max-conns", "12"}
}

// soakOnly is a run of the soak alone: the service on the bench database
// with minute partitions archived to a scratch folder, the steady load,
// the samples, and the archive checked against what was dropped.
func (r *run) soakOnly(ctx context.Context, serve Serve, serverDSN, dsn string) error {
	dir, err := os.MkdirTemp("", "agentreach-soak-archive-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := r.start(ctx, serve, dsn, soakArgs(dir)...); err != nil {
		return err
	}
	samples, err := r.soak(ctx)
	if err != nil {
		return err
	}
	check, err := r.soakArchive(ctx, dir, samples[len(samples)-1].submitted)
	if err != nil {
		return err
	}
	if err := r.svc.Stop(); err != nil && !errors.Is(err, context.Canceled) {
		r.progress("the service stopped with: %v", err)
	}
	imported, err := r.soakImport(ctx, serverDSN, dir)
	if err != nil {
		return err
	}
	check += "\n" + imported
	table := fmt.Sprintf("Soaked %s on %s: %.0f jobs/s for %s, the default namespace keeping %s, partitions of %s.\n\n%s\n%s\n",
		time.Now().UTC().Format("2006-01-02"), hostDescription(), r.o.soakRate, r.o.soak, r.o.soakKeep, soakWidth, soakTable(samples), check)
	fmt.Fprint(r.env.Stdout, table)
	if r.o.out != "" {
		return os.WriteFile(r.o.out, []byte(table), 0o644)
	}
	return nil
}

// soak offers the steady load for --soak, sampling the database every
// --soak-every, and answers the samples (the last once the load ended and
// the callbacks were acknowledged).
func (r *run) soak(ctx context.Context) ([]soakSample, error) {
	body := fmt.Sprintf(`{"namespace":"default","retention_seconds":%d}`, int64(r.o.soakKeep/time.Second))
	if err := harness.Put(ctx, r.base+"/v1/policies/retention", body); err != nil {
		return nil, fmt.Errorf("set the soak's retention: %w", err)
	}
	client, done := newClient(64)
	defer done()
	var submitted atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	loadErr := make(chan error, 1)
	start := time.Now()
	go func() {
		n := int(r.o.soakRate * r.o.soak.Seconds())
		var failed atomic.Value
		err := paced(lctx, r.o.soakRate, n, func(int) {
			if _, err := submitJob(lctx, client, r.base, jobBody("bench.echo", r.receiver.URL)); err != nil {
				failed.Store(err)
				return
			}
			submitted.Add(1)
		})
		if e, ok := failed.Load().(error); ok && err == nil {
			err = e
		}
		loadErr <- err
	}()
	var samples []soakSample
	tick := time.NewTicker(r.o.soakEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-loadErr:
			if err != nil {
				return nil, fmt.Errorf("the soak's load: %w", err)
			}
			if err := waitAcked(ctx, &r.acked, submitted.Load()); err != nil {
				return nil, err
			}
			at := time.Since(start)
			if err := r.settle(ctx); err != nil { // the jobs projection folded every job
				return nil, err
			}
			s, err := r.soakSample(ctx, at, submitted.Load())
			return append(samples, s), err
		case <-tick.C:
			s, err := r.soakSample(ctx, time.Since(start), submitted.Load())
			if err != nil {
				return nil, err
			}
			samples = append(samples, s)
			r.progress("soak: %s, %d jobs submitted, %d kept, %d partitions (%d dropped), %.1f MB",
				s.at.Round(time.Second), s.submitted, s.jobs, s.attached, s.dropped, float64(s.bytes)/1e6)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (r *run) soakSample(ctx context.Context, at time.Duration, submitted int64) (soakSample, error) {
	s := soakSample{at: at, submitted: submitted}
	err := r.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM jobs),
		(SELECT count(*) FROM event_partitions WHERE dropped_at IS NULL), (SELECT count(*) FROM event_partitions WHERE dropped_at IS NOT NULL),
		pg_database_size(current_database()),
		(SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = 'events'::regclass)::bigint`).
		Scan(&s.jobs, &s.attached, &s.dropped, &s.bytes, &s.eventsBytes)
	return s, err
}

// soakArchive checks the archive in dir against the log: every job
// dropped (submitted, no longer in the database) archived exactly once.
func (r *run) soakArchive(ctx context.Context, dir string, submitted int64) (string, error) {
	ms, err := retention.VerifyArchive(dir)
	if err != nil && !errors.Is(err, retention.ErrNoArchive) {
		return "", err
	}
	archived := 0
	for _, m := range ms {
		archived += m.Streams
	}
	var left int64
	if err := r.pool.QueryRow(ctx, `SELECT count(DISTINCT stream_id) FROM events WHERE starts_with(stream_id, 'job:')`).Scan(&left); err != nil {
		return "", err
	}
	dropped := submitted - left
	verdict := "every dropped job archived exactly once"
	if int64(archived) != dropped {
		verdict = fmt.Sprintf("MISMATCH: %d jobs dropped, %d archived", dropped, archived)
	}
	return fmt.Sprintf("Archive (%s): %d partitions verified against their manifests, %d jobs in them; %d jobs dropped from the log: %s.",
		filepath.Base(dir), len(ms), archived, dropped, verdict), nil
}

// soakTable is the samples as a Markdown table.
func soakTable(samples []soakSample) string {
	var b strings.Builder
	b.WriteString("| since the load began | jobs submitted | jobs kept | partitions (dropped) | database MB | the log's MB |\n|---|---|---|---|---|---|\n")
	for _, s := range samples {
		fmt.Fprintf(&b, "| %s | %d | %d | %d (%d) | %.1f | %.1f |\n", s.at.Round(time.Second), s.submitted, s.jobs,
			s.attached, s.dropped, float64(s.bytes)/1e6, float64(s.eventsBytes)/1e6)
	}
	return b.String()
}

// soakImport loads the archive in dir into a fresh database, as an auditor
// would (agentreach archive import, then a rebuild), and says whether it
// gave back every archived event and job, each job finished as it was.
func (r *run) soakImport(ctx context.Context, serverDSN, dir string) (string, error) {
	r.progress("soak: importing the archive into a fresh database")
	dsn, drop, err := harness.ScratchDatabase(ctx, serverDSN, "agentreach_soak_import_"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		return "", err
	}
	defer drop()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := arsql.Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return "", err
	}
	store := eventstore.New(pool)
	start := time.Now()
	reps, err := retention.ImportArchive(ctx, store, dir, nil)
	if errors.Is(err, retention.ErrNoArchive) {
		return "Nothing was archived: nothing to import.", nil
	}
	if err != nil {
		return "", err
	}
	var archived, imported int
	for _, rep := range reps {
		archived, imported = archived+rep.Events, imported+rep.Imported
	}
	took := time.Since(start)
	done, err := eventstore.NewProjector(store, slog.New(slog.DiscardHandler), projection.Jobs{}).
		Rebuild(ctx, projection.Jobs{}, eventstore.FromStart, nil)
	if err != nil {
		return "", err
	}
	var streams, jobs, succeeded int
	err = pool.QueryRow(ctx, `SELECT (SELECT count(DISTINCT stream_id) FROM events WHERE starts_with(stream_id, 'job:')),
		(SELECT count(*) FROM jobs), (SELECT count(*) FROM jobs WHERE status = 'SUCCESS' AND callback_done)`).Scan(&streams, &jobs, &succeeded)
	if err != nil {
		return "", err
	}
	verdict := "the same jobs and events"
	if imported != archived || jobs != streams || succeeded != jobs {
		verdict = "MISMATCH"
	}
	return fmt.Sprintf("Imported into a fresh database in %s: %d of the %d archived events, %d jobs' streams; a rebuild folded %d events into %d jobs, "+
		"%d of them SUCCESS and called back: %s.", took.Round(time.Second), imported, archived, streams, done.Events, jobs, succeeded, verdict), nil
}
