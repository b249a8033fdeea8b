package pgtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The connection budget. Every test binary of a `go test ./...` run shares
// one test server, which also serves a `make run` beside it; the preflight
// checks that Budget connections are free before anything is built, and
// this file makes the suite keep within them for its whole run: a test
// reserves the connections it may open (DefaultConns for a database and one
// service on it) before it gets its database, waits while the reservations
// of every running test binary leave too few, and gives them back when it
// ends. The reservations live in one file under the temporary directory,
// read and written under flock(2); a binary that dies leaves lines that
// the next reader drops (its pid is gone).

// DefaultConns is what a test reserves with its database: a pool of
// PoolMaxConns, the service's listening connection, and the maintenance
// connection that creates and drops the database.
const DefaultConns = PoolMaxConns + 3

// defaultBudget is the suite's share of the server when PGTEST_CONNS is
// not set: what `make test`'s preflight checks is free.
const defaultBudget = 45

// Budget is how many connections the suite may hold at once on the test
// server: PGTEST_CONNS, or 45.
func Budget() int {
	if n, err := strconv.Atoi(os.Getenv("PGTEST_CONNS")); err == nil && n > 0 {
		return n
	}
	return defaultBudget
}

// Option changes what NewDatabase reserves.
type Option func(*options)

type options struct{ conns int }

// Conns reserves n connections for the test instead of DefaultConns: for a
// test that runs several service processes on its database.
func Conns(n int) Option { return func(o *options) { o.conns = n } }

var (
	reservationSeq atomic.Int64
	// heldBy is what each running test of this binary holds.
	heldMu sync.Mutex
	heldBy = map[testing.TB]int{}
)

// Reserve holds n of the suite's connections on the test server until t
// ends, waiting while other tests hold too many. n above the budget is
// taken as the whole budget: such a test runs alone.
func Reserve(t testing.TB, n int) {
	t.Helper()
	suiteBudget.reserve(t, n)
}

// budget is a number of connections shared through a reservations file.
type budget struct {
	path string
	size func() int
}

var suiteBudget = budget{path: budgetPath(), size: Budget}

func (bg budget) reserve(t testing.TB, n int) {
	t.Helper()
	n = min(max(n, 1), bg.size())
	// A test that reserves again while it holds would wait on itself for
	// ever once the two exceed the budget: it fails at once instead.
	heldMu.Lock()
	mine := heldBy[t] + n
	if mine <= bg.size() {
		heldBy[t] = mine
	}
	heldMu.Unlock()
	if mine > bg.size() {
		t.Fatalf("pgtest: this test reserves %d connections in all, more than the suite's budget of %d", mine, bg.size())
	}
	t.Cleanup(func() {
		heldMu.Lock()
		if heldBy[t] -= n; heldBy[t] == 0 {
			delete(heldBy, t)
		}
		heldMu.Unlock()
	})
	token := fmt.Sprintf("%d-%d", os.Getpid(), reservationSeq.Add(1))
	start, told := time.Now(), false
	for {
		ok, held, err := bg.change(func(lines []reservation) ([]reservation, bool) {
			used := 0
			for _, r := range lines {
				used += r.conns
			}
			if used+n > bg.size() {
				return lines, false
			}
			return append(lines, reservation{pid: os.Getpid(), start: startTime(os.Getpid()), token: token, conns: n}), true
		})
		if err != nil {
			t.Fatalf("pgtest: connection budget: %v", err)
		}
		if ok {
			break
		}
		if !told && time.Since(start) > 30*time.Second {
			t.Logf("pgtest: waiting for %d of the suite's %d test-server connections (%d held by running tests)", n, bg.size(), held)
			told = true
		}
		time.Sleep(20 * time.Millisecond) // poll interval while waiting for the budget
	}
	t.Cleanup(func() {
		_, _, err := bg.change(func(lines []reservation) ([]reservation, bool) {
			kept := lines[:0]
			for _, r := range lines {
				if r.token != token {
					kept = append(kept, r)
				}
			}
			return kept, true
		})
		if err != nil {
			t.Errorf("pgtest: give back connections: %v", err)
		}
	})
}

type reservation struct {
	pid   int
	start string // the process's start time: a pid the system reused is not the holder
	token string
	conns int
}

// startTime is pid's start time as /proc tells it ("-" where there is no
// /proc), and "zombie" for a process that has exited but not been reaped:
// it holds no connection.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "-"
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		if f := bytes.Fields(b[i+1:]); len(f) > 19 {
			if string(f[0]) == "Z" || string(f[0]) == "X" {
				return "zombie"
			}
			return string(f[19]) // field 22 of the whole line: starttime
		}
	}
	return "-"
}

// budgetPath is the reservations file, one per test server.
func budgetPath() string {
	h := fnv.New32a()
	h.Write([]byte(AdminURL()))
	return filepath.Join(os.TempDir(), fmt.Sprintf("agentreach-pgtest-%x.conns", h.Sum32()))
}

// change runs change on the live reservations under an exclusive lock
// and writes back what it returns when it says so; it reports change's
// answer and the connections held before it.
func (bg budget) change(change func([]reservation) ([]reservation, bool)) (bool, int, error) {
	f, err := os.OpenFile(bg.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, 0, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return false, 0, err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks it too

	var lines []reservation
	held := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r reservation
		if _, err := fmt.Sscanf(sc.Text(), "%d %s %s %d", &r.pid, &r.start, &r.token, &r.conns); err != nil {
			continue // a torn line: nobody holds it
		}
		if !alive(r.pid) || startTime(r.pid) != r.start {
			continue // its process is gone
		}
		lines = append(lines, r)
		held += r.conns
	}
	if err := sc.Err(); err != nil {
		return false, held, err
	}
	out, ok := change(lines)
	if !ok {
		return false, held, nil
	}
	var b bytes.Buffer
	for _, r := range out {
		fmt.Fprintf(&b, "%d %s %s %d\n", r.pid, r.start, r.token, r.conns)
	}
	if err := f.Truncate(0); err != nil {
		return false, held, err
	}
	if _, err := f.WriteAt(b.Bytes(), 0); err != nil {
		return false, held, err
	}
	return true, held, nil
}

// alive reports whether process pid still runs.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
