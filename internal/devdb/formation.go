//go:build unix

package devdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A Formation is a pg_auto_failover formation on 127.0.0.1: a monitor and
// two data nodes, each a pg_autoctl process of its own, for failover
// drills. The nodes replicate synchronously (pg_auto_failover's default:
// both in the replication quorum, number_sync_standbys 0), so that a
// commit acknowledged while both stream is on both.
type Formation struct {
	dir     string
	bin     string // the folder of pg_ctl, first on pg_autoctl's PATH
	owner   *account
	monitor member
	nodes   []member
	log     *slog.Logger
}

// member is one pg_autoctl process and the cluster it keeps.
type member struct {
	name string // node_1, node_2; "monitor"
	port int
	dir  string // PGDATA
	cmd  *exec.Cmd
}

// FormationNode is a data node as the monitor sees it.
type FormationNode struct {
	Name     string `json:"nodename"`
	Port     int    `json:"nodeport"`
	Reported string `json:"current_group_state"`
	Assigned string `json:"assigned_group_state"`
	Health   int    `json:"health"`
}

// formationSettings keep the nodes small (pg_autoctl sizes memory for the
// whole machine) and checkpoints quick (a standby's base backup waits for
// one).
const formationSettings = "shared_buffers = '64MB'\nmax_connections = 150\n" +
	"checkpoint_timeout = '30s'\ncheckpoint_completion_target = 0.1\nwal_keep_size = '256MB'\n"

// FindAutoctl returns the path of pg_autoctl, or "" when it is not
// installed (Debian: postgresql-15-auto-failover and pg-auto-failover-cli).
func FindAutoctl() string {
	p, err := exec.LookPath("pg_autoctl")
	if err != nil {
		return ""
	}
	return p
}

// StartFormation forms a monitor and two data nodes under a new temporary
// folder, all on free ports of 127.0.0.1, with a database named dbname,
// and returns once one node is primary and the other secondary.
func StartFormation(ctx context.Context, dbname string, log *slog.Logger) (_ *Formation, err error) {
	autoctl := FindAutoctl()
	if autoctl == "" {
		return nil, errors.New("pg_autoctl is not installed (Debian: postgresql-15-auto-failover pg-auto-failover-cli)")
	}
	_, pgctl, err := FindServerBinaries(nil)
	if err != nil {
		return nil, err
	}
	if pgctl, err = filepath.EvalSymlinks(pgctl); err != nil {
		return nil, err
	}
	owner, err := serverAccount()
	if err != nil {
		return nil, err
	}
	f := &Formation{bin: filepath.Dir(pgctl), owner: owner, log: log}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close())
		}
	}()
	if f.dir, err = os.MkdirTemp("", "agentreach-ha-"); err != nil {
		return f, err
	}
	if owner != nil {
		if err = os.Chown(f.dir, int(owner.uid), int(owner.gid)); err != nil {
			return f, err
		}
	}
	for _, sub := range []string{"config", "share", "run"} {
		if err = f.mkdir(sub); err != nil {
			return f, err
		}
	}

	// The monitor: made stopped, told to listen on loopback only (it has
	// no --listen and would take '*'), then run.
	f.monitor = member{name: "monitor", dir: filepath.Join(f.dir, "monitor")}
	if f.monitor.port, err = freePort(ctx); err != nil {
		return f, err
	}
	if err = f.initdb(ctx, f.monitor.dir, "shared_buffers = '32MB'\nmax_connections = 50\n"); err != nil {
		return f, err
	}
	if _, err = f.autoctl(ctx, "create", "monitor", "--pgdata", f.monitor.dir, "--pgport", strconv.Itoa(f.monitor.port),
		"--hostname", "localhost", "--auth", "trust", "--no-ssl"); err != nil {
		return f, err
	}
	if _, err = f.autoctl(ctx, "config", "set", "--pgdata", f.monitor.dir, "postgresql.listen_addresses", "127.0.0.1"); err != nil {
		return f, err
	}
	if err = f.spawn(&f.monitor, "run", "--pgdata", f.monitor.dir); err != nil {
		return f, err
	}
	monitorURL := fmt.Sprintf("postgres://autoctl_node@localhost:%d/pg_auto_failover?sslmode=disable", f.monitor.port)

	// The first node starts from a cluster made here with small settings;
	// the second is a base backup of it, and so has them too.
	for i := 1; i <= 2; i++ {
		n := member{name: fmt.Sprintf("node_%d", i), dir: filepath.Join(f.dir, fmt.Sprintf("node%d", i))}
		if n.port, err = freePort(ctx); err != nil {
			return f, err
		}
		if i == 1 {
			if err = f.initdb(ctx, n.dir, formationSettings); err != nil {
				return f, err
			}
		}
		if err = f.spawn(&n, "create", "postgres", "--pgdata", n.dir, "--pgport", strconv.Itoa(n.port),
			"--hostname", "localhost", "--listen", "127.0.0.1", "--name", n.name, "--monitor", monitorURL,
			"--auth", "trust", "--no-ssl", "--dbname", dbname, "--run"); err != nil {
			return f, err
		}
		f.nodes = append(f.nodes, n)
		if i == 1 { // the second node joins once the first stands alone
			if err = f.WaitRoles(ctx, 60*time.Second, "single"); err != nil {
				return f, err
			}
		}
	}
	return f, f.WaitRoles(ctx, 120*time.Second, "primary", "secondary")
}

// URL is the multi-host connection string of the formation's database for
// user: whichever node is writable.
func (f *Formation) URL(user, dbname string) string {
	hosts := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.port)
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&target_session_attrs=read-write", user, strings.Join(hosts, ","), dbname)
}

// State returns the data nodes as the monitor sees them.
func (f *Formation) State(ctx context.Context) ([]FormationNode, error) {
	out, err := f.autoctl(ctx, "show", "state", "--pgdata", f.monitor.dir, "--json")
	if err != nil {
		return nil, err
	}
	var nodes []FormationNode
	if err := json.Unmarshal(out, &nodes); err != nil {
		return nil, fmt.Errorf("pg_autoctl show state: %w: %s", err, tail(out, 5))
	}
	return nodes, nil
}

// WaitRoles waits until the data nodes are settled (each reported state
// its assigned one) in roles, one node each, in any order.
func (f *Formation) WaitRoles(ctx context.Context, within time.Duration, roles ...string) error {
	return f.waitFor(ctx, within, fmt.Sprint(roles), func(nodes []FormationNode) bool {
		if len(nodes) != len(roles) {
			return false
		}
		want := map[string]int{}
		for _, r := range roles {
			want[r]++
		}
		for _, n := range nodes {
			if n.Reported != n.Assigned || want[n.Reported] == 0 {
				return false
			}
			want[n.Reported]--
		}
		return true
	})
}

// WaitNode waits until the data node named node is settled in state.
func (f *Formation) WaitNode(ctx context.Context, within time.Duration, node, state string) error {
	return f.waitFor(ctx, within, node+" "+state, func(nodes []FormationNode) bool {
		for _, n := range nodes {
			if n.Name == node && n.Reported == state && n.Assigned == state {
				return true
			}
		}
		return false
	})
}

// waitFor polls the monitor until ok holds of the data nodes, or within
// passes.
func (f *Formation) waitFor(ctx context.Context, within time.Duration, what string, ok func([]FormationNode) bool) error {
	deadline := time.Now().Add(within)
	var last []FormationNode
	for {
		nodes, err := f.State(ctx)
		if err == nil {
			if last = nodes; ok(nodes) {
				return nil
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("formation not %s within %s: %+v\n%s", what, within, last, f.Logs()), err)
		}
		time.Sleep(200 * time.Millisecond) // poll interval while waiting on the condition
	}
}

// Primary returns the data node the monitor has as primary.
func (f *Formation) Primary(ctx context.Context) (FormationNode, error) {
	nodes, err := f.State(ctx)
	if err != nil {
		return FormationNode{}, err
	}
	for _, n := range nodes {
		if n.Reported == "primary" && n.Assigned == "primary" {
			return n, nil
		}
	}
	return FormationNode{}, fmt.Errorf("no primary: %+v", nodes)
}

// Failover is pg_autoctl perform failover: the primary is demoted, the
// secondary promoted, and it returns once the roles are settled.
func (f *Formation) Failover(ctx context.Context) error {
	_, err := f.autoctl(ctx, "perform", "failover", "--pgdata", f.monitor.dir, "--wait", "60")
	return err
}

// KillPostmaster sends SIGKILL to node's postmaster alone: its pg_autoctl
// starts PostgreSQL again on the same node.
func (f *Formation) KillPostmaster(node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	pid := postmasterOf(m.dir)
	if pid == 0 {
		return fmt.Errorf("%s: no postmaster running", node)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// KillNode loses node whole: its pg_autoctl and its postmaster are killed
// (SIGKILL), and nothing restarts them until RestartNode.
func (f *Formation) KillNode(node string) error {
	m, err := f.member(node)
	if err != nil {
		return err
	}
	pid := postmasterOf(m.dir)
	err = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL) // pg_autoctl and its services
	if pid != 0 && processAlive(pid) {
		err = errors.Join(err, syscall.Kill(pid, syscall.SIGKILL))
	}
	_ = m.cmd.Wait()
	waitGone(pid, stopTimeout)
	return err
}

// RestartNode runs a lost node's pg_autoctl again: it rejoins the
// formation (pg_rewind when it has to).
func (f *Formation) RestartNode(node string) error {
	for i := range f.nodes {
		if f.nodes[i].name == node {
			return f.spawn(&f.nodes[i], "run", "--pgdata", f.nodes[i].dir)
		}
	}
	return fmt.Errorf("no node %q", node)
}

func (f *Formation) member(node string) (*member, error) {
	for i := range f.nodes {
		if f.nodes[i].name == node {
			return &f.nodes[i], nil
		}
	}
	return nil, fmt.Errorf("no node %q", node)
}

// postmasterOf is the pid of the postmaster serving dir, or 0: the pid its
// postmaster.pid names, if that process runs and names dir (a stale file
// may name a pid reused since).
func postmasterOf(dir string) int {
	pid := readPostmasterPID(dir)
	if !processAlive(pid) {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
		return 0
	}
	return pid
}

// Logs returns the last lines of each pg_autoctl's log.
func (f *Formation) Logs() string {
	var b strings.Builder
	for _, m := range append([]member{f.monitor}, f.nodes...) {
		if m.dir != "" {
			fmt.Fprintf(&b, "%s:\n%s\n", m.name, tail(readFile(m.dir+".log"), 15))
		}
	}
	return b.String()
}

// Close stops every pg_autoctl (each stops its PostgreSQL), kills what
// does not stop in time, and removes the formation's folder.
func (f *Formation) Close() error {
	var errs []error
	members := append(append([]member(nil), f.nodes...), f.monitor)
	for _, m := range members {
		if m.cmd != nil && m.cmd.ProcessState == nil {
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, m := range members {
		if m.cmd == nil || m.cmd.ProcessState != nil {
			continue
		}
		done := make(chan struct{})
		go func() { _ = m.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	for _, m := range members {
		if m.dir == "" {
			continue
		}
		if pid := postmasterOf(m.dir); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if !waitGone(pid, stopTimeout) {
				errs = append(errs, fmt.Errorf("%s: postmaster %d did not stop", m.name, pid))
			}
		}
	}
	if f.dir != "" {
		errs = append(errs, os.RemoveAll(f.dir))
	}
	return errors.Join(errs...)
}

func (f *Formation) mkdir(sub string) error {
	p := filepath.Join(f.dir, sub)
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	if f.owner != nil {
		return os.Chown(p, int(f.owner.uid), int(f.owner.gid))
	}
	return nil
}

// initdb makes a cluster in dir with settings appended to its
// postgresql.auto.conf (which wins over pg_autoctl's own file).
func (f *Formation) initdb(ctx context.Context, dir, settings string) error {
	if out, err := f.command(ctx, filepath.Join(f.bin, exe("initdb")), "-D", dir, "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", dir, err, tail(out, 10))
	}
	auto, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = auto.WriteString(settings)
	return errors.Join(err, auto.Close())
}

// autoctl runs a pg_autoctl command to its end and returns its standard
// output.
func (f *Formation) autoctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := f.command(ctx, "pg_autoctl", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("pg_autoctl %s: %w\n%s", strings.Join(args[:2], " "), err, tail([]byte(stderr.String()), 10))
	}
	return out, nil
}

// spawn starts a long-running pg_autoctl for m, in a process group of its
// own, its output in the file beside m's data folder.
func (f *Formation) spawn(m *member, args ...string) error {
	logFile, err := os.OpenFile(m.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := f.command(context.Background(), "pg_autoctl", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return err
	}
	m.cmd = cmd
	f.log.Info("devdb: pg_autoctl "+args[0], "member", m.name, "port", m.port, "pid", cmd.Process.Pid)
	return nil
}

// command is a pg_autoctl or server command run as the server's account,
// with pg_ctl's folder first on PATH and pg_autoctl's files under the
// formation's folder.
func (f *Formation) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = f.dir
	cmd.Env = append(serverEnv(),
		"PATH="+f.bin+":/usr/local/bin:/usr/bin:/bin",
		"HOME="+f.dir,
		"XDG_CONFIG_HOME="+filepath.Join(f.dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(f.dir, "share"),
		"XDG_RUNTIME_DIR="+filepath.Join(f.dir, "run"))
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if f.owner != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: f.owner.uid, Gid: f.owner.gid}
	}
	return cmd
}
