package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// termBuffer stands for a terminal: a buffer that says it is one.
type termBuffer struct{ bytes.Buffer }

func (*termBuffer) IsTerminal() bool { return true }

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// TestFlagHelpStreams: a flag set's help asked for goes to Stdout, the
// help of a refused flag to Stderr, and what a command prints after the
// parse (its usage after a mistake) to Stderr.
func TestFlagHelpStreams(t *testing.T) {
	t.Parallel()
	env, out, errOut := testEnv(nil)
	fs := env.NewFlagSet("x")
	fs.Bool("flag", false, "a flag")
	require.ErrorIs(t, ParseFlags(fs, []string{"-h"}), flag.ErrHelp)
	require.Contains(t, out.String(), "  -flag\n")
	require.Empty(t, errOut.String())

	out.Reset()
	err := ParseFlags(fs, []string{"--nope"})
	require.ErrorIs(t, err, ErrUsage)
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "flag provided but not defined: -nope")
	require.Contains(t, errOut.String(), "  -flag\n")

	errOut.Reset()
	require.NoError(t, ParseFlags(fs, []string{"--flag"}))
	mistake := UsageMistake(fs, ErrUsage)
	require.ErrorIs(t, mistake, ErrUsage)
	require.Contains(t, errOut.String(), "  -flag\n", "a mistake after the parse shows the help")
	require.Empty(t, out.String())
	errOut.Reset()
	_ = UsageMistake(fs, &FlagError{Err: errors.New("bad")})
	_ = UsageMistake(fs, errors.New("the service said no"))
	require.Empty(t, errOut.String(), "not twice for a refused flag, never for an error that is no usage mistake")
}

// TestIsTerminal: a pipe, a file and /dev/null are no terminals; a
// TerminalWriter says; a pseudo-terminal is one.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	require.False(t, IsTerminal(w))
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	require.False(t, IsTerminal(f))
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { null.Close() })
	require.False(t, IsTerminal(null), "/dev/null is a character device, not a terminal")
	require.False(t, IsTerminal(&bytes.Buffer{}))
	require.True(t, IsTerminal(&termBuffer{}))
	if ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0); err == nil {
		t.Cleanup(func() { ptmx.Close() })
		require.True(t, IsTerminal(ptmx))
	}
}

// TestColourOnlyOnATerminal: statuses and event types are coloured on a
// terminal (green SUCCESS, red DEAD_LETTER), never with NO_COLOR, --json
// or off a terminal; coloured tables stay aligned as the plain ones.
func TestColourOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(&fakeAPI{})
	t.Cleanup(api.Close)
	run := func(stdout interface {
		String() string
		Write([]byte) (int, error)
	}, env map[string]string, args ...string) string {
		t.Helper()
		env["AGENTREACH_URL"] = api.URL
		var errOut bytes.Buffer
		err := Jobs(context.Background(), Env{Stdout: stdout, Stderr: &errOut, Getenv: func(k string) string { return env[k] }}, args)
		if !errors.Is(err, ErrNotSucceeded) {
			require.NoError(t, err, errOut.String())
		}
		return stdout.String()
	}
	plain := run(&bytes.Buffer{}, map[string]string{}, "list")
	require.NotContains(t, plain, "\x1b[")
	coloured := run(&termBuffer{}, map[string]string{}, "list")
	require.Contains(t, coloured, ansiGreen+"SUCCESS"+ansiReset)
	require.Equal(t, plain, ansi.ReplaceAllString(coloured, ""), "the same table, the colours aside")
	coloured = run(&termBuffer{}, map[string]string{}, "list")
	require.Equal(t, strings.Index(plain, "CAPABILITY"), strings.Index(ansi.ReplaceAllString(coloured, ""), "CAPABILITY"))

	events := run(&termBuffer{}, map[string]string{}, "events", "j1")
	require.Contains(t, events, ansiYellow+"ATTEMPT_FAILED    "+ansiReset, "padded, then coloured")
	require.Equal(t, run(&bytes.Buffer{}, map[string]string{}, "events", "j1"), ansi.ReplaceAllString(events, ""))
	require.Contains(t, run(&termBuffer{}, map[string]string{}, "submit", "--capability", "dead", "--wait"), ansiRed+"DEAD_LETTER"+ansiReset)

	for name, env := range map[string]map[string]string{"NO_COLOR=1": {"NO_COLOR": "1"}, "TERM=dumb": {"TERM": "dumb"}} {
		require.NotContains(t, run(&termBuffer{}, env, "list"), "\x1b[", name)
		require.NotContains(t, run(&termBuffer{}, env, "events", "j1"), "\x1b[", name)
	}
	require.NotContains(t, run(&termBuffer{}, map[string]string{}, "list", "--json"), "\x1b[")
	require.NotContains(t, run(&termBuffer{}, map[string]string{}, "get", "j1", "--json"), "\x1b[")

	agents := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"agents":[{"agent_id":"a-long-name","namespace":"default","capabilities":["c"],"state":"HEALTHY",`+
			`"breaker":{"state":"closed"}},{"agent_id":"b","namespace":"default","capabilities":["c"],"state":"DOWN",`+
			`"breaker":{"state":"open"}}]}`)
	}))
	t.Cleanup(agents.Close)
	base := agents.URL
	var term termBuffer
	require.NoError(t, Agents(context.Background(), Env{Stdout: &term, Stderr: &bytes.Buffer{}, Getenv: func(k string) string {
		return map[string]string{"AGENTREACH_URL": base}[k]
	}}, nil))
	require.Contains(t, term.String(), ansiGreen+"HEALTHY"+ansiReset)
	require.Contains(t, term.String(), ansiRed+"DOWN"+ansiReset)
	require.Contains(t, term.String(), ansiRed+"open"+ansiReset)
	var off bytes.Buffer
	require.NoError(t, Agents(context.Background(), Env{Stdout: &off, Stderr: &bytes.Buffer{}, Getenv: func(k string) string {
		return map[string]string{"AGENTREACH_URL": base}[k]
	}}, []string{"list"}))
	require.Equal(t, off.String(), ansi.ReplaceAllString(term.String(), ""), "agents list is agents; aligned alike")
}

// TestProgressBarOffATerminal: off a terminal the bar prints plain lines,
// one at each tenth and the last, never a carriage return.
func TestProgressBarOffATerminal(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	bar := ProgressBar{W: &b, Label: "jobs"}
	for i := int64(0); i <= 1000; i += 7 {
		bar.Update(i, 1000)
	}
	bar.Done()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.NotContains(t, b.String(), "\r")
	require.Len(t, lines, 11, b.String()) // 0%, then each tenth up to 90%, then the last
	require.Equal(t, "jobs   0% 0/1000 events", lines[0])
	require.Equal(t, "jobs  10% 105/1000 events", lines[1])
	require.Equal(t, "jobs  99% 994/1000 events", lines[10], "the last state, printed by Done")

	b.Reset()
	done := ProgressBar{W: &b, Label: "x", Unit: "jobs"}
	done.Update(5, 10)
	done.Update(10, 10)
	done.Done()
	require.Equal(t, "x  50% 5/10 jobs\nx 100% 10/10 jobs\n", b.String(), "not the last line twice")
}

// TestSubmitIntentAndPayload: --intent goes as the API's intent, with no
// capability; --payload @FILE and @- read the payload; the mistakes are
// usage errors that send nothing.
func TestSubmitIntentAndPayload(t *testing.T) {
	t.Parallel()
	f := &fakeAPI{}
	api := httptest.NewServer(f)
	t.Cleanup(api.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "p.json")
	require.NoError(t, os.WriteFile(file, []byte(" {\"a\": [1, 2]}\n"), 0o600))
	run := func(stdin string, args ...string) (string, error) {
		env, out, errOut := testEnv(map[string]string{"AGENTREACH_URL": api.URL})
		env.Stdin = strings.NewReader(stdin)
		err := Jobs(context.Background(), env, append([]string{"submit"}, args...))
		return out.String() + errOut.String(), err
	}
	last := func() string { f.mu.Lock(); defer f.mu.Unlock(); return f.reqs[len(f.reqs)-1] }

	_, err := run("", "--intent", "where is my parcel", "--payload", "@"+file)
	require.NoError(t, err)
	require.Equal(t, `POST /v1/jobs  {"intent":"where is my parcel","payload":{"a":[1,2]}}`, last())
	_, err = run(`{"from":"stdin"}`, "--capability", "c", "--payload", "@-")
	require.NoError(t, err)
	require.Equal(t, `POST /v1/jobs  {"capability":"c","payload":{"from":"stdin"}}`, last())
	sent := len(f.reqs)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{nope"), 0o600))
	for want, args := range map[string][]string{
		"--capability or --intent is required":         {"--payload", "{}"},
		"--capability or --intent, not both":           {"--capability", "c", "--intent", "words"},
		"no such file or directory":                    {"--capability", "c", "--payload", "@" + filepath.Join(dir, "missing.json")},
		"--payload @" + dir + "/bad.json must be JSON": {"--capability", "c", "--payload", "@" + filepath.Join(dir, "bad.json")},
		"--payload @- (standard input) must be JSON":   {"--capability", "c", "--payload", "@-"},
		"--payload must be JSON":                       {"--capability", "c", "--payload", "{nope"},
		"name the file":                                {"--capability", "c", "--payload", "@"},
	} {
		out, err := run("", args...)
		require.ErrorIs(t, err, ErrUsage, "%v", args)
		require.Equal(t, ExitUsage, ExitCode(err))
		require.Contains(t, err.Error(), want, "%v", args)
		require.Contains(t, out, "  -intent string", "%v: the help, on stderr", args)
	}
	require.Len(t, f.reqs, sent, "a usage mistake sends nothing")
}
