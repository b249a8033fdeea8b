package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/internal/harness"
	"github.com/agentreach/agentreach/projection"
)

// growChunk is how many jobs the growth submits between two progress
// lines.
const growChunk = 20_000

// growSteps are the sizes a growth to n jobs measures at: a hundredth, a
// tenth and all of n (each at least one job, none twice).
func growSteps(n int) []int {
	var out []int
	for _, s := range []int{n / 100, n / 10, n} {
		if s > 0 && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// growStep is what one step of the growth measured.
type growStep struct {
	jobs int
	rate float64 // jobs/s while it filled (submit → callback acknowledged)
	// bytes is the database's size a job, by table group (growTables).
	bytes map[string]float64
	// latency is the median of each read (growReads), in milliseconds.
	latency map[string]float64
}

// growTables groups the tables whose size the growth reports.
var growTables = []struct{ name, match string }{
	{"events (the log)", "events"},
	{"jobs (read model)", "jobs"},
	{"River's jobs", "river_job"},
	{"everything else", ""},
}

// grow fills the bench database to --grow jobs through the normal write
// path (submits with callbacks to the push agents, each SUCCESS and
// called back) and, at each of growSteps, measures the bytes a job by
// table, the list and view reads, and the rate it filled at: the figures
// that say whether reads stay flat as data grows.
func (r *run) grow(ctx context.Context) error {
	var steps []growStep
	total, mid, last := 0, "", ""
	for _, target := range growSteps(r.o.grow) {
		start, before := time.Now(), total
		for total < target {
			n := min(growChunk, target-total)
			r.acked.Store(0)
			_, ids, err := benchEndToEnd(ctx, r.base, r.receiver.URL, "bench.echo", n, false, &r.acked)
			if err != nil {
				return fmt.Errorf("grow to %d jobs: %w", target, err)
			}
			if half := target / 2; total < half && half <= total+n || mid == "" {
				mid = ids[min(max(half-total-1, 0), len(ids)-1)] // a job from the middle of the step's jobs
			}
			total += n
			last = ids[len(ids)-1]
			r.progress("grow: %d of %d jobs", total, r.o.grow)
		}
		step := growStep{jobs: total, rate: float64(total-before) / time.Since(start).Seconds()}
		if err := r.settle(ctx); err != nil {
			return err
		}
		var err error
		if step.bytes, err = r.bytesPerJob(ctx, total); err != nil {
			return err
		}
		if step.latency, err = r.growReads(ctx, mid, last); err != nil {
			return err
		}
		r.progress("grow: at %d jobs, %.0f bytes a job; the first page of GET /v1/jobs in %.2f ms",
			total, sumOf(step.bytes), step.latency["GET /v1/jobs?limit=50"])
		steps = append(steps, step)
	}
	r.growth = steps
	var err error
	r.afterGrowth, err = r.afterGrow(ctx)
	return err
}

// growFigure is one figure measured on the grown database.
type growFigure struct {
	name  string
	value string
}

// afterGrow measures, on the grown database, what depends on its size
// rather than on a page: a snapshot of every read model, a rebuild from it
// and one from position 0; and the reach_health view with a day of the
// agents' figures against 30 days of them (as the service keeps them: a
// day of minutes and 30 days of hours; and 30 days of minutes, as if none
// had been rolled up).
func (r *run) afterGrow(ctx context.Context) ([]growFigure, error) {
	var out []growFigure
	add := func(name, format string, args ...any) {
		out = append(out, growFigure{name, fmt.Sprintf(format, args...)})
		r.progress("grow: %s: %s", name, out[len(out)-1].value)
	}
	if err := r.settle(ctx); err != nil {
		return nil, err
	}
	store := eventstore.New(r.pool)
	projector := eventstore.NewProjector(store, slog.New(slog.DiscardHandler), projection.All()...)
	events, err := eventstore.CountEvents(ctx, r.pool)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var rows int64
	for _, p := range projector.Projections() {
		snap, err := projector.TakeSnapshot(ctx, p)
		if err != nil {
			return nil, err
		}
		rows += snap.Rows
	}
	add("snapshot of every read model", "%.1f s (%d rows)", time.Since(start).Seconds(), rows)
	for _, from := range []struct {
		name string
		from eventstore.RebuildFrom
	}{{"rebuild of every read model from its snapshot", eventstore.FromSnapshot}, {"rebuild of every read model from position 0", eventstore.FromStart}} {
		start, folded := time.Now(), int64(0)
		for _, p := range projector.Projections() {
			done, err := projector.Rebuild(ctx, p, from.from, nil)
			if err != nil {
				return nil, err
			}
			folded += done.Events
		}
		took := time.Since(start)
		add(from.name, "%.1f s (%d events folded, of %d in the log)", took.Seconds(), folded, events)
	}
	health := func() (float64, error) {
		var lat []time.Duration
		for range 15 {
			t0 := time.Now()
			if _, err := r.pool.Exec(ctx, "SELECT * FROM reach_health"); err != nil {
				return 0, fmt.Errorf("reach_health: %w", err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return pct(lat, 0.5), nil
	}
	for _, fill := range []struct {
		name          string
		days, minutes int
	}{
		{"SELECT * FROM reach_health, a day of figures", 1, 24 * 60},
		{"… 30 days of figures, as kept (a day of minutes, 30 days of hours)", 30, 24 * 60},
		{"… 30 days of figures, none rolled up (30 days of minutes)", 30, 30 * 24 * 60},
	} {
		var minutes, hours int64
		if err := r.pool.QueryRow(ctx, qBenchFillAgentFigures, fill.days, fill.minutes, len(r.agents)).Scan(&minutes, &hours); err != nil {
			return nil, fmt.Errorf("fill the agents' figures: %w", err)
		}
		if _, err := r.pool.Exec(ctx, "VACUUM (ANALYZE) agent_stats_minute, agent_stats_hour"); err != nil {
			return nil, err
		}
		ms, err := health()
		if err != nil {
			return nil, err
		}
		add(fill.name, "%.2f ms median", ms)
	}
	return out, nil
}

// figuresTable is the figures as a Markdown table.
func figuresTable(figures []growFigure) string {
	if len(figures) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| on the grown database | |\n|---|---|\n")
	for _, f := range figures {
		fmt.Fprintf(&b, "| %s | %s |\n", f.name, f.value)
	}
	return b.String()
}

// bytesPerJob is the database's size by table group over jobs.
func (r *run) bytesPerJob(ctx context.Context, jobs int) (map[string]float64, error) {
	rows, err := r.pool.Query(ctx, qBenchTableSizes)
	if err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	out := map[string]float64{}
	var name string
	var size int64
	_, err = pgx.ForEachRow(rows, []any{&name, &size}, func() error {
		group := growTables[len(growTables)-1].name
		for _, t := range growTables {
			if t.match == name {
				group = t.name
			}
		}
		out[group] += float64(size) / float64(jobs)
		return nil
	})
	return out, err
}

func sumOf(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// growReads are the reads the growth times: the job lists (each filter,
// and a page from the middle), one job and its events, and the health
// view, by what they are called in the table.
func growReads(mid, last string) []struct{ name, path string } {
	return []struct{ name, path string }{
		{"GET /v1/jobs?limit=50", "/v1/jobs?limit=50"},
		{"… status=SUCCESS", "/v1/jobs?limit=50&status=SUCCESS"},
		{"… status=DEAD_LETTER (none)", "/v1/jobs?limit=50&status=DEAD_LETTER"},
		{"… capability=bench.echo", "/v1/jobs?limit=50&capability=bench.echo"},
		{"… agent_id=bench-0", "/v1/jobs?limit=50&agent_id=bench-0"},
		{"… a page from the middle (cursor)", "/v1/jobs?limit=50&cursor=" + mid},
		{"GET /v1/jobs/{id}", "/v1/jobs/" + last},
		{"GET /v1/jobs/{id}/events", "/v1/jobs/" + last + "/events"},
		{"GET /v1/metrics/agents", "/v1/metrics/agents"},
	}
}

// growReads times each read (the median of growTries) over HTTP, and the
// reach_health view in SQL.
func (r *run) growReads(ctx context.Context, mid, last string) (map[string]float64, error) {
	const growTries = 15
	client, done := newClient(1)
	defer done()
	out := map[string]float64{}
	for _, rd := range growReads(mid, last) {
		var lat []time.Duration
		for range growTries {
			t0 := time.Now()
			req, err := harness.NewRequest(ctx, http.MethodGet, r.base+rd.path, "")
			if err != nil {
				return nil, err
			}
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s answered %d", rd.path, resp.StatusCode)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		out[rd.name] = pct(lat, 0.5)
	}
	var lat []time.Duration
	for range growTries {
		t0 := time.Now()
		if _, err := r.pool.Exec(ctx, "SELECT * FROM reach_health"); err != nil {
			return nil, fmt.Errorf("reach_health: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	out["SELECT * FROM reach_health"] = pct(lat, 0.5)
	return out, nil
}

// growthTable is the growth's Markdown table: a column a step.
func growthTable(steps []growStep) string {
	var b strings.Builder
	b.WriteString("| measure |")
	for _, s := range steps {
		fmt.Fprintf(&b, " %s jobs |", fmtRate(float64(s.jobs)))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(steps)) + "\n")
	line := func(name string, cell func(growStep) string) {
		b.WriteString("| " + name + " |")
		for _, s := range steps {
			b.WriteString(" " + cell(s) + " |")
		}
		b.WriteString("\n")
	}
	line("fill rate, jobs/s (submit → SUCCESS → callback acknowledged)", func(s growStep) string { return fmt.Sprintf("%.0f", s.rate) })
	line("database bytes a job", func(s growStep) string { return fmt.Sprintf("%.0f", sumOf(s.bytes)) })
	for _, t := range growTables {
		line("… "+t.name, func(s growStep) string { return fmt.Sprintf("%.0f", s.bytes[t.name]) })
	}
	for _, rd := range growReads("", "") {
		line(rd.name+", median ms", func(s growStep) string { return fmt.Sprintf("%.2f", s.latency[rd.name]) })
	}
	line("SELECT * FROM reach_health, median ms", func(s growStep) string { return fmt.Sprintf("%.2f", s.latency["SELECT * FROM reach_health"]) })
	return b.String()
}
