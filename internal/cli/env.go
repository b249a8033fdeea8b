package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"time"
)

// ErrUsage marks an error in how a command was called: the program prints
// it and exits with status 2.
var ErrUsage = errors.New("usage")

// Env is what a command runs with: its output streams and its environment.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Lookup returns the environment variable name, or def when it is unset or
// empty.
func (e Env) Lookup(name, def string) string {
	if v := e.Getenv(name); v != "" {
		return v
	}
	return def
}

// NewFlagSet returns the flag set of `agentreach name`: it reports to
// Stderr and returns parse errors rather than exiting.
func (e Env) NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("agentreach "+name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
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
		if err := f.Parse(args); err != nil {
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
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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
