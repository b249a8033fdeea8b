package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// services are the `agentreach serve` child processes of a run, on one
// database, each on its own port.
type services struct {
	exe string
	env []string
	dsn string

	procs []*process
	alive atomic.Int64 // bit i set: service i may be called
}

// process is one service child process; cmd is nil once it is stopped.
type process struct {
	addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
}

// startAll starts n services, each on a port free when it is chosen.
func (s *services) startAll(ctx context.Context, n int) error {
	s.procs = make([]*process, n)
	for i := range s.procs {
		addr, err := freeAddr(ctx)
		if err != nil {
			return err
		}
		s.procs[i] = &process{addr: addr}
		if err := s.start(ctx, i); err != nil {
			return fmt.Errorf("start service %d: %w", i, err)
		}
	}
	return nil
}

// freeAddr is a port of 127.0.0.1 that is free now.
func freeAddr(ctx context.Context) (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start starts service i on its address, waits until it is ready, and
// marks it alive. Ending ctx stops it with SIGTERM.
func (s *services) start(ctx context.Context, i int) error {
	p := s.procs[i]
	cmd := exec.CommandContext(ctx, s.exe, "serve", "--insecure", "--addr", p.addr, "--database-url", s.dsn, "--log-level", "warn",
		"--deadline-sweep-interval", "250ms", "--lost-after", "2s", "--max-conns", "30")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.Env = append(os.Environ(), s.env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.out = cmd, out
	if err := harness.WaitReady(ctx, "http://"+p.addr+"/readyz", 60*time.Second); err != nil {
		return err
	}
	s.setAlive(i, true)
	return nil
}

func (s *services) setAlive(i int, alive bool) {
	for {
		old := s.alive.Load()
		bits := old &^ (1 << i)
		if alive {
			bits |= 1 << i
		}
		if s.alive.CompareAndSwap(old, bits) {
			return
		}
	}
}

// kill SIGKILLs service i once callers no longer pick it.
func (s *services) kill(i int) {
	s.setAlive(i, false)
	p := s.procs[i]
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// stopAll stops every running service with SIGTERM and waits for it.
func (s *services) stopAll() {
	for i, p := range s.procs {
		if p == nil || p.cmd == nil {
			continue
		}
		s.setAlive(i, false)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// pick is the base URL of a live service for caller k: callers spread over
// the services, and move on from a dead one.
func (s *services) pick(k int) string {
	return "http://" + s.procs[pick(s.alive.Load(), len(s.procs), k)].addr
}

// pick is the first service from k (mod n) whose bit is set in alive, and
// service 0 when none is.
func pick(alive int64, n, k int) int {
	for j := range n {
		i := (k + j) % n
		if alive&(1<<i) != 0 {
			return i
		}
	}
	return 0
}

// lockedBuffer is a service's output, written by its process and read by
// the run.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
