//go:build unix

package devdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// serverLogName is the pg_ctl -l log file inside the data folder. Not
	// "log": that is PostgreSQL's default log_directory.
	serverLogName = "postmaster.log"
	// maxSocketPath is the usable length of a Unix socket path (sun_path is
	// 104 bytes on BSD/macOS, 108 on Linux, minus the NUL).
	maxSocketPath = 103
	// startAttempts bounds retries when the postmaster exits at once (e.g.
	// the free port was taken in between).
	startAttempts = 3
	// readyTimeout bounds waiting for the first connection after pg_ctl.
	readyTimeout = 15 * time.Second
	// stopTimeout bounds pg_ctl stop and each wait for the postmaster to go.
	stopTimeout = 30 * time.Second
)

// cluster is a private PostgreSQL cluster started by startCluster.
type cluster struct {
	dataDir   string
	removeDir bool // Open created dataDir: remove it on stop
	pgctl     string
	addr      string // 127.0.0.1:port
	pid       int    // postmaster pid, 0 if not started
	started   bool   // pg_ctl start was run: stop must stop the server
	owner     *account
	log       *slog.Logger
}

// account is the system user the server binaries run as (only when we are
// root: initdb and postgres refuse to run as root).
type account struct {
	name     string
	uid, gid uint32
}

// serverAccount returns nil when the binaries can run as ourselves, else the
// "postgres" system user.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root; "+
			"need a %q system user to run initdb/pg_ctl as: %w", "postgres", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %w", err)
	}
	return &account{name: u.Username, uid: uint32(uid), gid: uint32(gid)}, nil
}

// startCluster initialises (unless dataDir already holds a cluster) and
// starts a private cluster listening on a free port of 127.0.0.1.
func startCluster(ctx context.Context, initdb, pgctl, dataDir string, log *slog.Logger) (_ *cluster, err error) {
	owner, err := serverAccount()
	if err != nil {
		return nil, err
	}
	c := &cluster{pgctl: pgctl, owner: owner, log: log}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.stop())
		}
	}()

	if dataDir == "" {
		// MkdirTemp gives mode 0700, as PostgreSQL wants; os.TempDir is
		// world-traversable, so the postgres user can reach it.
		if c.dataDir, err = os.MkdirTemp("", "agentreach-devdb-"); err != nil {
			return c, err
		}
		c.removeDir = true
	} else {
		if c.dataDir, err = filepath.Abs(dataDir); err != nil {
			return c, err
		}
		if _, statErr := os.Stat(c.dataDir); errors.Is(statErr, os.ErrNotExist) {
			if err = os.MkdirAll(c.dataDir, 0o700); err != nil {
				return c, err
			}
		}
	}
	if owner != nil && !fileExists(filepath.Join(c.dataDir, "PG_VERSION")) {
		if err = os.Chown(c.dataDir, int(owner.uid), int(owner.gid)); err != nil {
			return c, err
		}
	}

	if fileExists(filepath.Join(c.dataDir, "PG_VERSION")) {
		log.Info("devdb: reusing existing cluster", "dir", c.dataDir)
	} else {
		log.Info("devdb: initdb in "+c.dataDir, "initdb", initdb)
		out, err := c.run(ctx, initdb, "-D", c.dataDir, "-A", "trust", "-U", "postgres",
			"-E", "UTF8", "--no-locale", "--no-sync")
		if err != nil {
			return c, fmt.Errorf("initdb %s: %w\n%s", c.dataDir, err, tail(out, 20))
		}
	}

	if pid := readPostmasterPID(c.dataDir); processAlive(pid) {
		// Someone else's server: fail without stopping it.
		c.dataDir, c.removeDir = "", false
		return c, fmt.Errorf("a PostgreSQL server (pid %d) already runs in %s", pid, dataDir)
	}

	logFile := filepath.Join(c.dataDir, serverLogName)
	socketDir := c.dataDir
	if len(socketDir)+len("/.s.PGSQL.65535") > maxSocketPath {
		socketDir = "" // path too long for a Unix socket: TCP only
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort(ctx)
		if err != nil {
			return c, err
		}
		c.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		// pg_ctl passes -o through /bin/sh: quote the folder.
		// Room for several service processes (50 connections each).
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300", port, shellQuote(socketDir))
		c.started = true
		out, err := c.run(ctx, c.pgctl, "-D", c.dataDir, "-o", opts, "-w", "-t", "60", "-l", logFile, "start")
		c.pid = readPostmasterPID(c.dataDir)
		if err == nil {
			break
		}
		if ctx.Err() != nil || attempt == startAttempts || processAlive(c.pid) {
			return c, fmt.Errorf("pg_ctl start: %w\n%s\nserver log %s:\n%s",
				err, tail(out, 10), logFile, tail(readFile(logFile), 20))
		}
		log.Info("devdb: PostgreSQL did not start, retrying on another port", "err", err)
	}
	if c.pid == 0 {
		return c, fmt.Errorf("pg_ctl start succeeded but %s has no pid\nserver log:\n%s",
			filepath.Join(c.dataDir, "postmaster.pid"), tail(readFile(logFile), 20))
	}

	// pg_ctl -w waits for "ready", but make sure a TCP connection works.
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ping(ctx, dsn("postgres", c.addr, "postgres"), 2*time.Second)
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return c, fmt.Errorf("PostgreSQL on %s does not accept connections: %w\nserver log %s:\n%s",
				c.addr, err, logFile, tail(readFile(logFile), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Info("devdb: started private PostgreSQL on "+c.addr, "dir", c.dataDir, "pid", c.pid)
	return c, nil
}

// stop stops the server (if it runs), waits for the postmaster to exit and
// removes the data folder if we created it. It is idempotent.
func (c *cluster) stop() error {
	var errs []error
	pid := 0
	if c.started {
		if pid = readPostmasterPID(c.dataDir); pid == 0 {
			pid = c.pid
		}
	}
	if pid != 0 && processAlive(pid) {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout+5*time.Second)
		out, err := c.run(ctx, c.pgctl, "-D", c.dataDir, "-m", "fast", "-w",
			"-t", strconv.Itoa(int(stopTimeout/time.Second)), "stop")
		cancel()
		gone := waitGone(pid, stopTimeout)
		if !gone && readPostmasterPID(c.dataDir) == pid {
			// Still our postmaster (its pid file is there): immediate
			// shutdown, then kill.
			c.log.Warn("devdb: PostgreSQL did not stop, sending SIGQUIT", "pid", pid, "err", err)
			_ = syscall.Kill(pid, syscall.SIGQUIT)
			if gone = waitGone(pid, 10*time.Second); !gone {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				gone = waitGone(pid, 5*time.Second)
			}
		}
		if !gone {
			errs = append(errs, fmt.Errorf("PostgreSQL postmaster pid %d still running after stop (pg_ctl stop: %w)\n%s",
				pid, err, tail(out, 10)))
		} else {
			c.log.Info("devdb: stopped private PostgreSQL", "addr", c.addr, "pid", pid)
		}
	}
	if len(errs) == 0 {
		c.pid, c.started = 0, false
	}
	if c.removeDir && c.dataDir != "" && len(errs) == 0 {
		if err := os.RemoveAll(c.dataDir); err != nil {
			errs = append(errs, err)
		} else {
			c.removeDir = false
		}
	}
	return errors.Join(errs...)
}

// run runs a server binary (as the postgres user when we are root) with
// stdin from /dev/null and output captured, and returns its output.
func (c *cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The postmaster pg_ctl forks redirects its own output to the log file;
	// should anything keep our pipe open anyway, don't wait for it forever.
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = c.dataDir
	cmd.Env = serverEnv()
	if c.owner != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: c.owner.uid, Gid: c.owner.gid},
		}
	}
	err := cmd.Run()
	return out.Bytes(), err
}

// serverEnv is our environment without PG* variables (PGDATA, PGPORT,
// PGOPTIONS, ...) that could redirect or reconfigure the server tools.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(ctx context.Context) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// readPostmasterPID returns the pid on the first line of postmaster.pid, or 0.
func readPostmasterPID(dataDir string) int {
	if dataDir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// processAlive reports whether pid exists and is not a zombie. The
// postmaster is reparented to pid 1 once pg_ctl exits; if that init does not
// reap, the dead postmaster lingers as a zombie, which signal 0 still finds.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false // ESRCH
	}
	// Linux: /proc/<pid>/stat is "pid (comm) S ..."; Z or X means dead.
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			if s := b[i+2]; s == 'Z' || s == 'X' {
				return false
			}
		}
	}
	return true
}

// waitGone polls until pid is gone or timeout passes.
func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readFile returns the file's content, or the read error as text.
func readFile(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return []byte(err.Error())
	}
	defer f.Close()
	// The log of a dev cluster is small; cap anyway.
	const max = 1 << 20
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return []byte(err.Error())
	}
	return b
}

// tail returns the last n lines of b, indented.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// restart restarts the server with the options it was started with (the
// same port): pg_ctl restart -m fast, waiting until it accepts connections.
func (c *cluster) restart(ctx context.Context) error {
	if !c.started {
		return errors.New("devdb: the cluster is not running")
	}
	logFile := filepath.Join(c.dataDir, serverLogName)
	out, err := c.run(ctx, c.pgctl, "-D", c.dataDir, "-m", "fast", "-w", "-t", "60", "-l", logFile, "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s", err, tail(out, 10))
	}
	c.pid = readPostmasterPID(c.dataDir)
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ping(ctx, dsn("postgres", c.addr, "postgres"), 2*time.Second)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL on %s does not accept connections after restart: %w", c.addr, err)
		}
		time.Sleep(100 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// baseBackup writes a physical backup of the running cluster into dir
// (made if missing, empty otherwise) with pg_basebackup, run as the
// server's account: a checkpoint at once, and the WAL the backup needs
// streamed into it, so that dir starts as a cluster of its own.
func (c *cluster) baseBackup(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if c.owner != nil {
		if err := os.Chown(dir, int(c.owner.uid), int(c.owner.gid)); err != nil {
			return err
		}
	}
	// Beside the server's own pg_ctl (a link on PATH names its folder).
	pgctl, err := filepath.EvalSymlinks(c.pgctl)
	if err != nil {
		return err
	}
	bin := filepath.Join(filepath.Dir(pgctl), exe("pg_basebackup"))
	out, err := c.run(ctx, bin, "-d", dsn("postgres", c.addr, "postgres"), "-D", dir, "-X", "stream", "-c", "fast")
	if err != nil {
		return fmt.Errorf("pg_basebackup into %s: %w\n%s", dir, err, tail(out, 20))
	}
	return nil
}
