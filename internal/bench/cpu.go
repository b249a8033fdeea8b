package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentreach/agentreach/sql/queries"
)

var qBenchBackends = queries.Must("BenchBackends")

// cpuUse is the CPU time spent so far by this process and by the
// PostgreSQL backends serving the bench database, by pid: what a
// measurement costs, which the machine's other load moves far less than
// it moves rates.
type cpuUse struct {
	self     time.Duration
	backends map[int]time.Duration
}

// readCPU reads the CPU time of this process and of the backends
// connected to pool's database (from /proc: zero on another system).
func readCPU(ctx context.Context, pool *pgxpool.Pool) (cpuUse, error) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	u := cpuUse{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), backends: map[int]time.Duration{}}
	rows, err := pool.Query(ctx, qBenchBackends)
	if err != nil {
		return u, fmt.Errorf("bench backends: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return u, err
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			u.backends[pid] = procCPU(b)
		}
	}
	return u, rows.Err()
}

// since is the CPU time spent between before and u: this process's, and
// the backends' (one that connected since counts whole).
func (u cpuUse) since(before cpuUse) (self, db time.Duration) {
	for pid, t := range u.backends {
		db += t - before.backends[pid]
	}
	return u.self - before.self, db
}

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ), 100 on
// every Linux that matters.
const clockTick = 10 * time.Millisecond

// procCPU is the user and system time of /proc/PID/stat.
func procCPU(stat []byte) time.Duration {
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 { // the command may hold spaces
		s = s[i+1:]
	}
	f := strings.Fields(s) // f[0] is the state, field 3 of the file
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * clockTick
}
