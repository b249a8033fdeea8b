package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Go SDK's examples (sdk/examples) build and run as their comments
// say, against a service with authentication on: the push agent
// registers with AGENTREACH_URL and AGENTREACH_KEY alone, the caller gets
// a job's result by capability and by intent, a bad payload ends FAILED
// with its business code (exit 2), and SIGTERM takes the agent offline.
func TestGoSDKExamplesRun(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the test builds the examples with go")
	dir := t.TempDir()
	for _, ex := range []string{"push-agent", "caller"} {
		out, err := exec.CommandContext(t.Context(), goBin, "build", "-o", filepath.Join(dir, ex),
			"github.com/agentreach/agentreach/sdk/examples/"+ex).CombinedOutput()
		require.NoError(t, err, "build %s: %s", ex, out)
	}
	base := securedService(t, nil).m.URL()
	env := append(os.Environ(), "AGENTREACH_URL="+base, "AGENTREACH_KEY="+testAdminKey)

	agent := exec.Command(filepath.Join(dir, "push-agent"))
	agent.Env = append(env, "ADDR=127.0.0.1:0", "AGENT_ID=shouter-go-test")
	logs, err := agent.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	registered := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(logs)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "sdk: registered") {
				once = true
				close(registered)
			}
		}
	}()
	select {
	case <-registered:
	case <-time.After(30 * time.Second):
		t.Fatal("the example agent logged no registration within 30 s")
	}
	waitStateAuth(t, base, "shouter-go-test", "HEALTHY", 30*time.Second)

	caller := func(args ...string) (map[string]any, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "caller"), args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		var got map[string]any
		if code != 1 {
			require.NoError(t, json.Unmarshal(out.Bytes(), &got), "stdout %q, stderr %q", out.String(), errOut.String())
		}
		return got, code
	}
	got, code := caller("text.shout", `{"text": "hello"}`)
	require.Equal(t, 0, code)
	require.Equal(t, "SUCCESS", got["status"])
	require.Equal(t, map[string]any{"shout": "HELLO!"}, got["result"])
	require.Equal(t, "shouter-go-test", got["agent_id"])

	got, code = caller("text.shout", `{}`)
	require.Equal(t, 2, code, "a FAILED job exits 2")
	require.Equal(t, "FAILED", got["status"])
	require.Equal(t, "no_text", got["biz_code"])

	// By intent: the registration's description and examples feed the
	// namespace's catalogue, which takes them in a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, code = caller("-intent", "make this text loud", `{"text": "hi"}`)
		if code == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the intent never resolved to text.shout: exit %d", code)
		time.Sleep(200 * time.Millisecond) // poll interval while the catalogue takes the registration in
	}
	require.Equal(t, map[string]any{"shout": "HI!"}, got["result"])

	require.NoError(t, agent.Process.Signal(syscall.SIGTERM))
	require.NoError(t, agent.Wait(), "SIGTERM stops the example cleanly")
	waitStateAuth(t, base, "shouter-go-test", "OFFLINE", 20*time.Second)
}

// waitStateAuth waits for agent id to be in state want, asking with the
// admin key.
func waitStateAuth(t *testing.T, base, id, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, body := call(t, "GET", base+"/v1/agents/"+id, "Bearer "+testAdminKey, "")
		var a agentJSON
		if code == 200 {
			require.NoError(t, json.Unmarshal([]byte(body), &a))
			if a.State == want {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "agent %s is %s (%d), want %s within %s", id, a.State, code, want, within)
		time.Sleep(50 * time.Millisecond) // poll interval while waiting on the condition
	}
}
