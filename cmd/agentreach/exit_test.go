package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/internal/cli"
)

// Secrets the environment holds in the tests below; none may ever appear
// in what a command prints.
const (
	secretAdminKey = "ark_SECRET_admin_key_from_env_0001"
	secretCallback = "whsec_SECRETcallbacksecretfromenv0002"
	secretPassword = "SECRETpassword0003"
	secretAPIKey   = "ark_SECRET_cli_key_from_env_0004"
)

var secrets = []string{secretAdminKey, secretCallback, secretPassword, secretAPIKey}

// secretEnv is an environment full of secrets, every one a default some
// flag takes.
func secretEnv(extra map[string]string) map[string]string {
	env := map[string]string{
		"AGENTREACH_ADMIN_KEY":       secretAdminKey,
		"AGENTREACH_CALLBACK_SECRET": secretCallback,
		"DATABASE_URL":               "postgres://agentreach:" + secretPassword + "@127.0.0.1:1/agentreach?sslmode=disable",
		"AGENTREACH_KEY":             secretAPIKey,
		"AGENTREACH_URL":             "http://" + "127.0.0.1:1",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// runMain runs the program in process with env as its whole environment
// and answers its exit status and everything it printed.
func runMain(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut syncBuffer
	m := NewMain()
	m.Stdout, m.Stderr = &out, &errOut
	m.Getenv = func(k string) string { return env[k] }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx, args)
	if err != nil {
		var flagErr *cli.FlagError
		if !errors.Is(err, errHelp) && !errors.As(err, &flagErr) {
			errOut.Write([]byte("agentreach: " + err.Error() + "\n")) // as main prints it
		}
	}
	return exitCode(err), out.String(), errOut.String()
}

func requireNoSecret(t *testing.T, what string, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		for _, s := range secrets {
			require.NotContains(t, o, s, "%s printed a secret", what)
		}
	}
}

// Every command with its subcommands, as run from the shell.
var everyCommand = [][]string{
	{"serve"}, {"dev"}, {"migrate"}, {"agents"}, {"agents", "drain"}, {"agents", "down"}, {"agents", "up"}, {"agents", "update"},
	{"dig"}, {"mock-agent"}, {"a2a-agent"}, {"projections"}, {"projections", "rebuild"},
	{"keys"}, {"keys", "create"}, {"keys", "list"}, {"keys", "revoke"},
	{"jobs"}, {"jobs", "submit"}, {"jobs", "get"}, {"jobs", "list"}, {"jobs", "events"}, {"jobs", "cancel"}, {"jobs", "replay"},
	{"bench"}, {"chaos"}, {"verify"}, {"demo"},
}

// TestHelpAndUsageExitStatuses pins the exit status of help and of usage
// mistakes for every command (0 for -h and --help, 2 for an unknown flag or
// command), and that neither prints a secret the environment holds as a
// flag's default.
func TestHelpAndUsageExitStatuses(t *testing.T) {
	t.Parallel()
	env := secretEnv(nil)
	for _, cmd := range everyCommand {
		for _, help := range []string{"-h", "--help"} {
			code, out, errOut := runMain(t, env, append(cmd, help)...)
			require.Equal(t, 0, code, "%v %s: %s%s", cmd, help, out, errOut)
			require.NotEmpty(t, out+errOut, "%v %s prints its help", cmd, help)
			require.NotContains(t, out+errOut, "unknown", "%v %s", cmd, help)
			requireNoSecret(t, strings.Join(cmd, " ")+" "+help, out, errOut)
		}
		code, out, errOut := runMain(t, env, append(cmd, "--no-such-flag")...)
		require.Equal(t, 2, code, "%v --no-such-flag: %s%s", cmd, out, errOut)
		requireNoSecret(t, strings.Join(cmd, " ")+" --no-such-flag", out, errOut)
		if len(cmd) == 2 || !(cmd[0] == "jobs" || cmd[0] == "keys" || cmd[0] == "projections") {
			require.Contains(t, errOut, "flag provided but not defined: -no-such-flag", "%v names the flag", cmd)
			require.Equal(t, 1, strings.Count(errOut, "no-such-flag"), "%v says it once", cmd)
		}
	}
	for _, args := range [][]string{nil, {"frobnicate"}, {"jobs", "frobnicate"}, {"keys", "frobnicate"}, {"projections", "frobnicate"},
		{"agents", "frobnicate"}, {"jobs", "get"}, {"dig"}, {"dig", "a", "b"}, {"serve", "--rate-limit", "lots"}} {
		code, out, errOut := runMain(t, env, args...)
		require.Equal(t, 2, code, "%v: %s%s", args, out, errOut)
		requireNoSecret(t, strings.Join(args, " "), out, errOut)
		if len(args) > 0 && args[len(args)-1] == "frobnicate" {
			require.Equal(t, 1, strings.Count(errOut, `unknown `), "%v says it once", args)
			require.Contains(t, errOut, `command "frobnicate"`, "%v names the word", args)
		}
	}
	_, _, errOut := runMain(t, env)
	require.Contains(t, errOut, "agentreach: usage: agentreach COMMAND [flags]", "not a bare \"usage\"")
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"version"}, {"jobs", "help"}, {"keys", "help"}, {"projections", "help"},
		{"agents", "help"}} {
		code, out, errOut := runMain(t, env, args...)
		require.Equal(t, 0, code, "%v: %s%s", args, out, errOut)
		requireNoSecret(t, strings.Join(args, " "), out, errOut)
	}
	_, out, _ := runMain(t, env, "agents", "-h")
	require.Contains(t, out, "agentreach agents drain AGENT_ID", "agents -h names its subcommands")
	_, out, _ = runMain(t, env, "dig", "-h")
	require.Contains(t, out, "agentreach dig AGENT_ID", "dig -h says it takes an agent id (on stdout: it was asked for)")
	_, out, _ = runMain(t, env, "jobs", "-h")
	require.Contains(t, out, "agentreach jobs submit --capability C")
	require.Contains(t, out, "exits 3 when the job ends in another status than SUCCESS")
}

// TestErrorsPrintNoSecret: commands that fail on the database or the
// service (exit 1) name where they failed without its password, and the
// redaction of connection strings hides every form of password.
func TestErrorsPrintNoSecret(t *testing.T) {
	t.Parallel()
	env := secretEnv(nil)
	for _, args := range [][]string{{"migrate"}, {"verify"}, {"projections", "rebuild"}, {"agents"}, {"dig", "x"}, {"jobs", "get", "x"},
		{"keys", "list"}, {"migrate", "--database-url", "postgres://u:" + secretPassword + "@[::1"}} {
		code, out, errOut := runMain(t, env, args...)
		require.Equal(t, 1, code, "%v: %s%s", args, out, errOut)
		require.NotEmpty(t, errOut)
		requireNoSecret(t, strings.Join(args, " "), out, errOut)
		if args[0] == "projections" {
			require.NotContains(t, errOut, "agentreach migrate", "a database that does not answer is not one to migrate")
		}
	}
	for _, dsn := range []string{
		"postgres://u:" + secretPassword + "@127.0.0.1:5432/db",
		"postgres://u:" + secretPassword + "@127.0.0.1:5432/db?password=" + secretPassword,
		"host=127.0.0.1 user=u password=" + secretPassword + " dbname=db",
		"postgres://u:" + secretPassword + "@[::1",
	} {
		require.NotContains(t, redact(dsn), secretPassword, dsn)
	}
	require.Equal(t, "postgres://u:***@127.0.0.1:5432/db", redact("postgres://u:"+secretPassword+"@127.0.0.1:5432/db"))
	require.Equal(t, "postgres://u@127.0.0.1:5432/db", redact("postgres://u@127.0.0.1:5432/db"), "nothing to hide")
}

// TestProjectionsRebuildNamesItsDatabase: without --database-url or
// DATABASE_URL, projections rebuild refuses to guess (exit 2); with one it
// rebuilds that database and --json reports what it did.
func TestProjectionsRebuildNamesItsDatabase(t *testing.T) {
	t.Parallel()
	code, _, errOut := runMain(t, map[string]string{}, "projections", "rebuild")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--database-url or DATABASE_URL")
	require.Contains(t, errOut, "does not guess")

	_, help, _ := runMain(t, map[string]string{}, "projections", "rebuild", "-h")
	require.Contains(t, help, "-database-url")
	require.Contains(t, help, "-json")
	require.NotContains(t, help, "-rate-limit", "only its own flags")
	require.NotContains(t, help, "-admin-key")
	require.Contains(t, help, "  -database-url value\n", "no word of its usage taken for the value's name")

	dsn := newDatabase(t)
	code, _, errOut = runMain(t, map[string]string{"DATABASE_URL": dsn}, "migrate")
	require.Equal(t, 0, code, errOut)
	code, out, errOut := runMain(t, map[string]string{}, "projections", "rebuild", "jobs", "--database-url", dsn, "--json")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"projections":[{"name":"jobs","events":0,"tables":[{"table":"jobs","rows":0}],"duration_ms":0}]}`,
		regexpReplace(out, `"duration_ms": \d+`, `"duration_ms": 0`))
}

// TestSubmitWaitExitStatus runs the binary: submit --wait exits 0 for a
// job that succeeds and 3 for one that is dead-lettered, printing the job
// either way; a usage mistake exits 2 and help 0, as processes.
func TestSubmitWaitExitStatus(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "exit-ok", "exit.ok", 50, answer("SUCCESS", ""))
	env := []string{"AGENTREACH_URL=" + base}
	code, out := runProcess(t, env, "jobs", "submit", "--capability", "exit.ok", "--wait")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "SUCCESS")
	code, out = runProcess(t, env, "jobs", "submit", "--capability", "exit.none", "--max-attempts", "1", "--wait")
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "status      DEAD_LETTER")
	require.Contains(t, out, "agentreach: the job did not succeed: job ")
	code, out = runProcess(t, env, "jobs", "submit", "--no-such-flag")
	require.Equal(t, 2, code, out)
	code, out = runProcess(t, env, "keys", "-h")
	require.Equal(t, 0, code, out)
	require.NotContains(t, out, "unknown")
	code, out = runProcess(t, env, "dig", "nosuch")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `not_found (HTTP 404): no agent "nosuch"`)
	require.NotContains(t, out, "register it", "advice for an agent, not for whoever asks")
}

// TestDigWithoutAttempts: an agent nothing was sent to yet has no reach or
// success rate: n/a, not 0 %.
func TestDigWithoutAttempts(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "dig-idle", "dig.idle", 50, answer("SUCCESS", ""))
	code, out, errOut := runMain(t, map[string]string{"AGENTREACH_URL": base}, "dig", "dig-idle")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "0 attempted, 0 delivered, 0 succeeded, 0 failed, 0 timed out (reached n/a, answered OK of attempts n/a)")
	require.NotContains(t, out, "0.0%")
}

// TestCLINamespaces: an agent id in two namespaces is named by dig and the
// operator's actions with --namespace (the API's 409 says which flag), and
// jobs submit and list take --namespace too.
func TestCLINamespaces(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	a := newTestAgent(t, base, "ns-twin", "ns.work", 50, answer("SUCCESS", ""))
	postJSON(t, base+"/v1/agents", fmt.Sprintf(`{"agent_id":"ns-twin","namespace":"ns-other","capabilities":["ns.work"],"endpoint":%q,"ttl_seconds":20}`,
		a.srv.URL+"/deliver"), http.StatusCreated, nil)
	env := map[string]string{"AGENTREACH_URL": base}
	for _, args := range [][]string{{"dig", "ns-twin"}, {"agents", "down", "ns-twin"}} {
		code, out, errOut := runMain(t, env, args...)
		require.Equal(t, 1, code, "%v: %s%s", args, out, errOut)
		require.Contains(t, errOut, "conflict (HTTP 409)", args)
		require.Contains(t, errOut, "--namespace NS", "%v names the flag", args)
	}
	code, out, errOut := runMain(t, env, "dig", "ns-twin", "--namespace", "ns-other")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "ns-twin (namespace ns-other)")
	require.Contains(t, out, "no attempts in the last 1m: no error rate", "the breaker's rate of nothing is no figure, said over its window")

	waitFor(t, 20*time.Second, "ns-other/ns-twin HEALTHY", func() bool {
		var st struct{ State string }
		getJSON(t, base+"/v1/agents/ns-twin?namespace=ns-other", http.StatusOK, &st)
		return st.State == "HEALTHY"
	})
	code, out, errOut = runMain(t, env, "jobs", "submit", "--namespace", "ns-other", "--capability", "ns.work", "--wait", "--json")
	require.Equal(t, 0, code, errOut)
	var job struct {
		JobID     string `json:"job_id"`
		Namespace string `json:"namespace"`
		Status    string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &job), out)
	require.Equal(t, "ns-other", job.Namespace)
	require.Equal(t, "SUCCESS", job.Status)
	require.NotEmpty(t, job.JobID)
	waitProjected(t, svc) // jobs list reads the jobs read model
	code, out, errOut = runMain(t, env, "jobs", "list", "--namespace", "ns-other", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, job.JobID)
	code, out, errOut = runMain(t, env, "jobs", "list", "--namespace", "default", "--json")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, job.JobID)
}

// TestMockAgentNeedsAKey: against a service with authentication on,
// mock-agent without a key, with a refused key or with a key that cannot
// register stops at once (exit 1) and says a key with agents:write is
// needed, instead of retrying 401 forever.
func TestMockAgentNeedsAKey(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	reader, _ := createKey(t, base, testAdminKey, `{"namespace":"default","scopes":["jobs:read"]}`)
	for key, want := range map[string]string{"": "", "ark_refused_000000000000": "refused the key given", reader: "the key given has jobs:read"} {
		code, out, errOut := runMain(t, map[string]string{"AGENTREACH_URL": base, "AGENTREACH_KEY": key}, "mock-agent", "--id", "m1", "--capability", "c")
		require.Equal(t, 1, code, out+errOut)
		require.Contains(t, errOut, "mock-agent needs an API key with agents:write to register: --key or AGENTREACH_KEY")
		require.Contains(t, errOut, want)
		if key != "" {
			require.NotContains(t, out+errOut, key, "the key is never printed")
		}
	}
}

// TestPortInUseNamesTheFlag: a listen address in use says how to choose
// another.
func TestPortInUseNamesTheFlag(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	code, _, errOut := runMain(t, map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/x"},
		"serve", "--insecure", "--addr", l.Addr().String(), "--log-level", "error")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "listen on "+l.Addr().String()+" (choose another address with --addr or AGENTREACH_ADDR)")
}

// runProcess runs the test binary as agentreach with args and answers its
// exit status and its output, both streams.
func runProcess(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append([]string{"AGENTREACH_TEST_MAIN=1", "PATH=" + os.Getenv("PATH")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	require.NoError(t, err, out.String())
	return 0, out.String()
}

// errHelp is what a command's -h returns.
var errHelp = flag.ErrHelp

// regexpReplace replaces every match of pattern in s.
func regexpReplace(s, pattern, with string) string {
	return regexp.MustCompile(pattern).ReplaceAllString(s, with)
}
