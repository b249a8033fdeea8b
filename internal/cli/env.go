package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// ErrUsage marks an error in how a command was called: the program prints
// it and exits with status 2.
var ErrUsage = errors.New("usage")

// ErrNotSucceeded marks a job that ended in another status than SUCCESS
// (jobs submit --wait): the program exits with status 3.
var ErrNotSucceeded = errors.New("the job did not succeed")

// The program's exit statuses (README, "CLI exit statuses").
const (
	ExitOK           = 0 // done; also -h, --help and help
	ExitError        = 1 // the service answered an error, or could not be reached
	ExitUsage        = 2 // an unknown command or flag, a bad flag value, a missing argument
	ExitNotSucceeded = 3 // jobs submit --wait: the job ended FAILED, DEAD_LETTER, CANCELLED or REJECTED
)

// ExitCode is the exit status of a command that returned err.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrNotSucceeded):
		return ExitNotSucceeded
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitError
}

// FlagError is a flag the flag package refused; it has printed the error
// and the command's flags already, so it is not printed again.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }

// Unwrap makes a FlagError an ErrUsage.
func (e *FlagError) Unwrap() []error { return []error{ErrUsage, e.Err} }

// ParseFlags parses args with fs: -h is flag.ErrHelp, any other refusal
// a *FlagError (an ErrUsage). With a flag set of [Env.NewFlagSet], the
// help asked for (-h, --help) goes to Stdout, and the help printed with a
// usage mistake to Stderr.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	out, _ := fs.Output().(*flagOutput)
	if out != nil {
		out.held = new(bytes.Buffer)
	}
	err := fs.Parse(args)
	if out != nil {
		held := out.held
		out.held = nil
		w := out.stderr
		if errors.Is(err, flag.ErrHelp) {
			w = out.stdout
		}
		if _, werr := w.Write(held.Bytes()); werr != nil && err == nil {
			err = werr
		}
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &FlagError{Err: err}
}

// flagOutput is the output of a flag set of Env.NewFlagSet: Stderr (a
// usage mistake, or help a command prints itself after one), except that
// what the flag package writes while ParseFlags parses is held until it is
// known to be the help asked for (to Stdout) or a refusal (to Stderr).
type flagOutput struct {
	stdout, stderr io.Writer
	held           *bytes.Buffer
}

func (o *flagOutput) Write(p []byte) (int, error) {
	if o.held != nil {
		return o.held.Write(p)
	}
	return o.stderr.Write(p)
}

// UsageMistake prints fs's usage on Stderr when err is a usage mistake
// the flag package has not reported (a missing argument, a bad value),
// so that every usage mistake shows the help; it answers err.
func UsageMistake(fs *flag.FlagSet, err error) error {
	var flagErr *FlagError
	if errors.Is(err, ErrUsage) && !errors.As(err, &flagErr) && fs.Usage != nil {
		fs.Usage()
	}
	return err
}

// IsHelp reports whether a command's first argument asks for its help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// Env is what a command runs with: its output streams and its environment.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Stdin is what jobs submit --payload @- reads (nil: os.Stdin).
	Stdin io.Reader
}

// stdin is the command's standard input.
func (e Env) stdin() io.Reader {
	if e.Stdin == nil {
		return os.Stdin
	}
	return e.Stdin
}

// Lookup returns the environment variable name, or def when it is unset or
// empty.
func (e Env) Lookup(name, def string) string {
	if v := e.Getenv(name); v != "" {
		return v
	}
	return def
}

// NewFlagSet returns the flag set of `agentreach name`: it returns parse
// errors rather than exiting, and prints its help to Stdout when -h asks
// for it (ParseFlags), to Stderr with a usage mistake.
func (e Env) NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("agentreach "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{stdout: e.Stdout, stderr: e.Stderr})
	return fs
}

// Logger is the logger of a command that talks to the service: warnings and
// errors, as text on Stderr.
func (e Env) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Flags are a command's flags plus the --json switch every API command has.
type Flags struct {
	*flag.FlagSet
	JSON bool
}

// ParsePositional parses flags that may come before or after positional
// arguments (agentreach dig ID --json) and returns the positional ones.
func (f *Flags) ParsePositional(args []string) ([]string, error) {
	var pos []string
	for {
		if err := ParseFlags(f.FlagSet, args); err != nil {
			return nil, err
		}
		if f.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
}

// PrintJSON writes v to w as indented JSON.
//
// Every command's --json follows one rule: one JSON document on stdout,
// indented by two spaces and ended by a newline. A command that calls the
// API prints the service's answer as the API gives it (its field names,
// every field), through PrintRaw; the commands that call no API
// (projections rebuild) print their own report.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// PrintRaw writes the service's JSON answer raw to w, indented as PrintJSON
// indents.
func PrintRaw(w io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("the service's answer is not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// Ago says how long ago t was, to a tenth of a second; "-" for the zero time.
func Ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(100*time.Millisecond).String() + " ago"
}

// SplitList splits a comma-separated flag value, trimming each item and
// dropping empty ones.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
