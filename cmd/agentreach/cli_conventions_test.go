package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHelpGoesToStdout: help asked for (-h, --help, help COMMAND) goes to
// stdout and exits 0 for every command, group and leaf alike, and prints
// nothing on stderr; a usage mistake prints nothing on stdout, its help
// and the mistake on stderr, and exits 2.
func TestHelpGoesToStdout(t *testing.T) {
	t.Parallel()
	env := secretEnv(nil)
	cmds := append(append([][]string{}, everyCommand...), []string{"completion"}, []string{"agents", "list"},
		[]string{"projections", "snapshot"}, []string{"archive"}, []string{"archive", "verify"}, []string{"archive", "import"})
	for _, cmd := range cmds {
		for _, help := range []string{"-h", "--help"} {
			code, out, errOut := runMain(t, env, append(cmd, help)...)
			require.Equal(t, 0, code, "%v %s: %s%s", cmd, help, out, errOut)
			require.NotEmpty(t, out, "%v %s prints its help on stdout", cmd, help)
			require.Empty(t, errOut, "%v %s prints nothing on stderr", cmd, help)
		}
		code, out, errOut := runMain(t, env, append([]string{"help"}, cmd...)...)
		require.Equal(t, 0, code, "help %v: %s%s", cmd, out, errOut)
		require.NotEmpty(t, out, "help %v", cmd)
		require.Empty(t, errOut, "help %v", cmd)

		code, out, errOut = runMain(t, env, append(cmd, "--no-such-flag")...)
		require.Equal(t, 2, code, "%v --no-such-flag: %s%s", cmd, out, errOut)
		require.Empty(t, out, "%v --no-such-flag prints nothing on stdout", cmd)
		require.NotEmpty(t, errOut)
	}
	// Leaf help lists the leaf's flags, on stdout.
	_, out, _ := runMain(t, env, "jobs", "events", "-h")
	require.Contains(t, out, "  -follow\n")
	_, out, _ = runMain(t, env, "dig", "--help")
	require.Contains(t, out, "agentreach dig AGENT_ID")
	_, out, _ = runMain(t, env, "serve", "-h")
	require.Contains(t, out, "  -addr string")

	// Mistakes found after the flags are parsed print the help too.
	for _, args := range [][]string{{}, {"archive"}, {"jobs"}, {"jobs", "get"}, {"jobs", "submit"}, {"dig"}, {"agents", "drain"},
		{"agents", "update", "a1"}, {"completion"}, {"completion", "fish"}, {"help", "frobnicate"}} {
		code, out, errOut := runMain(t, env, args...)
		require.Equal(t, 2, code, "%v: %s%s", args, out, errOut)
		require.Empty(t, out, "%v: nothing on stdout", args)
		require.Regexp(t, `(?i)usage|agentreach `, errOut, "%v: the help on stderr", args)
		require.Contains(t, errOut, "agentreach: usage: ", "%v: then the mistake", args)
		requireNoSecret(t, strings.Join(args, " "), out, errOut)
	}
	_, _, errOut := runMain(t, env, "jobs", "get")
	require.Contains(t, errOut, "  -server string", "jobs get with no JOB_ID shows its flags")
}

// TestVersionFlag: --version and version print the version on stdout and
// exit 0.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		code, out, errOut := runMain(t, nil, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		require.Equal(t, "agentreach "+version+"\n", out, args)
		require.Empty(t, errOut)
	}
}

// TestCompletionScripts: completion bash prints a script bash reads, and
// whose function completes commands, subcommands and their flags (read
// from each command's own help); completion zsh one zsh reads.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	code, script, errOut := runMain(t, nil, "completion", "bash")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, script, "complete -o default -F _agentreach agentreach")
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the script with")
	}
	file := filepath.Join(t.TempDir(), "agentreach.bash")
	require.NoError(t, os.WriteFile(file, []byte(script), 0o600))
	complete := func(line ...string) []string {
		t.Helper()
		words := make([]string, len(line))
		for i, w := range line {
			words[i] = "'" + w + "'"
		}
		prog := "source " + file + "; COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" + strconv.Itoa(len(line)-1) +
			`; _agentreach; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
		cmd.Dir = t.TempDir() // -o default is bash's, not the function's: nothing to list here anyway
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, string(b))
		return strings.Fields(string(b))
	}
	require.Equal(t, []string{"jobs"}, complete("agentreach", "jo"))
	require.ElementsMatch(t, []string{"completion", "chaos"}, complete("agentreach", "c"))
	require.Equal(t, []string{"submit"}, complete("agentreach", "jobs", "su"))
	require.ElementsMatch(t, []string{"--intent", "--idempotency-key"}, complete("agentreach", "jobs", "submit", "--i"))
	require.Equal(t, []string{"--follow"}, complete("agentreach", "jobs", "events", "J1", "--f"))
	require.Equal(t, []string{"--watch"}, complete("agentreach", "agents", "--w"))
	require.Equal(t, []string{"--watch"}, complete("agentreach", "agents", "list", "--w"))
	require.Equal(t, []string{"drain"}, complete("agentreach", "agents", "dr"))
	require.Equal(t, []string{"--skills"}, complete("agentreach", "a2a-agent", "--sk"))
	require.ElementsMatch(t, []string{"bash"}, complete("agentreach", "completion", "b"))

	code, zscript, errOut := runMain(t, nil, "completion", "zsh")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(zscript, "#compdef agentreach\n"))
	require.Contains(t, zscript, "bashcompinit")
	if zsh, err := exec.LookPath("zsh"); err == nil {
		zfile := filepath.Join(t.TempDir(), "_agentreach")
		require.NoError(t, os.WriteFile(zfile, []byte(zscript), 0o600))
		b, err := exec.Command(zsh, "-n", zfile).CombinedOutput()
		require.NoError(t, err, string(b))
	}
}

// backgroundCLI runs the program with args in process until it ends on
// its own or stop is called; stop answers what Run returned.
type backgroundCLI struct {
	out, errOut syncBuffer
	cancel      context.CancelFunc
	done        chan error
}

func startCLI(t *testing.T, env map[string]string, args ...string) *backgroundCLI {
	t.Helper()
	b := &backgroundCLI{done: make(chan error, 1)}
	m := NewMain()
	m.Stdout, m.Stderr = &b.out, &b.errOut
	m.Getenv = func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { b.done <- m.Run(ctx, args) }()
	t.Cleanup(cancel)
	return b
}

// ended answers Run's error once it returned, or false.
func (b *backgroundCLI) ended() (error, bool) {
	select {
	case err := <-b.done:
		b.done <- err
		return err, true
	default:
		return nil, false
	}
}

// stop interrupts the command as Ctrl-C does and answers Run's error.
func (b *backgroundCLI) stop(t *testing.T) error {
	t.Helper()
	b.cancel()
	select {
	case err := <-b.done:
		b.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("the command did not stop on Ctrl-C\n%s%s", b.out.String(), b.errOut.String())
		return nil
	}
}

// TestJobsEventsFollow: jobs events --follow prints a job's events as they
// come, in the format of jobs events, and ends (exit 0) once the job is
// terminal; --json prints one event a line.
func TestJobsEventsFollow(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	a := newTestAgent(t, base, "follow-1", "follow.slow", 50, statusOnly(http.StatusAccepted))
	id := submitOK(t, base, `{"capability":"follow.slow","payload":{"n":1}}`)
	env := map[string]string{"AGENTREACH_URL": base}

	follow := startCLI(t, env, "jobs", "events", id, "--follow")
	jsonFollow := startCLI(t, env, "jobs", "events", "--json", id, "--follow")
	delivered := <-a.envelopes
	waitFor(t, 20*time.Second, "DELIVERED printed as it comes", func() bool {
		return strings.Contains(follow.out.String(), "DELIVERED ") && strings.Count(jsonFollow.out.String(), "\n") >= 3
	})
	_, ended := follow.ended()
	require.False(t, ended, "a job still DELIVERED is followed on:\n%s", follow.out.String())
	require.NotContains(t, follow.out.String(), "SUCCESS")

	code, rec := postResult(t, a, delivered, "SUCCESS")
	require.Equal(t, http.StatusOK, code, rec)
	for _, f := range []*backgroundCLI{follow, jsonFollow} {
		waitFor(t, 20*time.Second, "the follow ends with the job", func() bool { _, ended := f.ended(); return ended })
		err, _ := f.ended()
		require.NoError(t, err, f.errOut.String())
	}
	out := follow.out.String()
	require.Regexp(t, `(?m)^  #  AT\s+EVENT\s+DATA\n\s+1  \d\d:\d\d:\d\d\.\d{3}  SUBMITTED\s+`, out, "the header once, then the events")
	require.Equal(t, 1, strings.Count(out, "EVENT"), out)
	require.Regexp(t, `(?m)^\s+2  .*ROUTED\s+attempt 1 to follow-1$`, out)
	require.Regexp(t, `(?m)^\s+3  .*DELIVERED\s+attempt 1 at follow-1: HTTP 202`, out)
	require.Regexp(t, `(?m)^\s+4  .*SUCCESS\s+`, out)
	require.NotContains(t, out, "\x1b[", "no colour off a terminal")

	// The same as jobs events prints once the job ended.
	code, all, errOut := runMain(t, env, "jobs", "events", id)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, all, out)

	lines := strings.Split(strings.TrimSpace(jsonFollow.out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 4)
	for i, l := range lines {
		var e struct {
			Version int    `json:"version"`
			Type    string `json:"type"`
		}
		require.NoError(t, jsonUnmarshal(l, &e), l)
		require.Equal(t, i+1, e.Version, "each event once, in order")
	}
	require.Contains(t, lines[3], `"type":"SUCCESS"`)

	// A job already ended: its events, and the end at once.
	code, out, errOut = runMain(t, env, "jobs", "events", id, "--follow")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, all, out)
	// Ctrl-C while following ends quietly.
	id2 := submitOK(t, base, `{"capability":"follow.slow","payload":{"n":2}}`)
	<-a.envelopes
	f := startCLI(t, env, "jobs", "events", id2, "--follow")
	waitFor(t, 20*time.Second, "the second job's events", func() bool { return strings.Contains(f.out.String(), "DELIVERED") })
	require.NoError(t, f.stop(t))
}

// TestCLIAgentsWatch: agents --watch shows the table, then again when the
// registry changes (a new agent, a drain), until Ctrl-C, which ends it
// with exit 0; off a terminal each table printed differs from the one
// before. agents list --watch is the same command.
func TestCLIAgentsWatch(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "watch-1", "watch.a", 50, answer("SUCCESS", ""))
	env := map[string]string{"AGENTREACH_URL": base}
	w := startCLI(t, env, "agents", "--watch")
	wl := startCLI(t, env, "agents", "list", "--watch", "--json")
	waitFor(t, 20*time.Second, "the first table", func() bool {
		return regexp.MustCompile(`(?m)^watch-1\s+default\s+push\s+HEALTHY\s`).MatchString(w.out.String()) &&
			strings.Contains(wl.out.String(), `"agent_id":"watch-1"`)
	})
	newTestAgent(t, base, "watch-2", "watch.b", 50, answer("SUCCESS", ""))
	waitFor(t, 20*time.Second, "the new agent shown", func() bool {
		return regexp.MustCompile(`(?m)^watch-2\s+default\s+push\s+HEALTHY\s`).MatchString(w.out.String())
	})
	code, out, errOut := runMain(t, env, "agents", "drain", "watch-1", "--reason", "test")
	require.Equal(t, 0, code, out+errOut)
	waitFor(t, 20*time.Second, "the drain shown", func() bool {
		return regexp.MustCompile(`(?m)^watch-1\s+default\s+push\s+(DRAINING|OFFLINE)\s`).MatchString(w.out.String()) &&
			regexp.MustCompile(`"agent_id":"watch-1"[^\n]*"state":"(DRAINING|OFFLINE)"`).MatchString(wl.out.String())
	})
	_, ended := w.ended()
	require.False(t, ended, "watching until Ctrl-C")
	require.NoError(t, w.stop(t))
	require.NoError(t, wl.stop(t))
	require.Empty(t, w.errOut.String())

	ago := regexp.MustCompile(`\S+ ago|agents at \S+`)
	tables := strings.Split(w.out.String(), "\nagents at ")
	require.GreaterOrEqual(t, len(tables), 3, w.out.String())
	for i := 1; i < len(tables); i++ {
		require.NotEqual(t, ago.ReplaceAllString(tables[i-1], ""), ago.ReplaceAllString("agents at "+tables[i], ""),
			"off a terminal a table is printed again only when it changed:\n%s", w.out.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(wl.out.String()), "\n") {
		require.True(t, strings.HasPrefix(l, `{"agents":[`), "--json --watch: the list on a line each time: %s", l)
	}
}

// TestSubmitIntentAndPayloadFile runs the binary against a real service:
// --payload @FILE and @- (standard input) send the file's JSON; a missing
// file, one that is not JSON, and --capability with --intent (or neither)
// are usage mistakes (exit 2), nothing submitted.
func TestSubmitIntentAndPayloadFile(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "payload-1", "payload.echo", 50, answer("SUCCESS", ""))
	dir := t.TempDir()
	file := filepath.Join(dir, "payload.json")
	require.NoError(t, os.WriteFile(file, []byte("{\"from\": \"file\"}\n"), 0o600))
	env := map[string]string{"AGENTREACH_URL": base}
	code, out, errOut := runMain(t, env, "jobs", "submit", "--capability", "payload.echo", "--payload", "@"+file, "--json")
	require.Equal(t, 0, code, errOut)
	var sub struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, jsonUnmarshal(out, &sub))
	require.Equal(t, `{"from":"file"}`, submittedPayload(t, base, sub.JobID))

	// @- reads standard input (the binary, as from the shell).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "jobs", "submit", "--capability", "payload.echo", "--payload", "@-", "--json")
	cmd.Env = []string{"AGENTREACH_TEST_MAIN=1", "PATH=" + os.Getenv("PATH"), "AGENTREACH_URL=" + base}
	cmd.Stdin = strings.NewReader(`{"from":"stdin"}`)
	b, err := cmd.Output()
	require.NoError(t, err)
	require.NoError(t, jsonUnmarshal(string(b), &sub))
	require.Equal(t, `{"from":"stdin"}`, submittedPayload(t, base, sub.JobID))

	notJSON := filepath.Join(dir, "not.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("from: yaml\n"), 0o600))
	for args, want := range map[string]string{
		"--capability payload.echo --payload @" + filepath.Join(dir, "missing.json"): "no such file",
		"--capability payload.echo --payload @" + notJSON:                            "must be JSON",
		"--capability payload.echo --payload @":                                      "name the file",
		"--capability payload.echo --intent words":                                   "not both",
		"--payload {}": "--capability or --intent is required",
	} {
		code, out, errOut := runMain(t, env, append([]string{"jobs", "submit"}, strings.Fields(args)...)...)
		require.Equal(t, 2, code, "%s: %s%s", args, out, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, want, args)
	}
	var n int
	require.NoError(t, svc.m.app.pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = 'SUBMITTED'`).Scan(&n))
	require.Equal(t, 2, n, "a usage mistake submits nothing")

	// --intent goes as the API's intent: an intent no capability matches
	// is the service's 422, not a usage mistake.
	code, _, errOut = runMain(t, env, "jobs", "submit", "--intent", "qwxzv plorb", "--payload", "{}")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "intent")
}

// submittedPayload is the payload the job's SUBMITTED event holds.
func submittedPayload(t *testing.T, base, id string) string {
	t.Helper()
	events := jobEvents(t, base, id)
	require.Equal(t, "SUBMITTED", events[0].Type)
	var d struct {
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(events[0].Data, &d))
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, d.Payload))
	return b.String()
}
