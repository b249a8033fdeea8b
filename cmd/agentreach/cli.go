package main

import (
	"github.com/agentreach/agentreach/internal/cli"
)

// cliEnv is what the commands of internal/ run with.
func (m *Main) cliEnv() cli.Env {
	return cli.Env{Stdout: m.Stdout, Stderr: m.Stderr, Getenv: m.Getenv}
}

// apiFlags are the flags and client of a command that calls the API.
func (m *Main) apiFlags(name string) (*cli.Flags, *cli.Client) { return cli.APIFlags(m.cliEnv(), name) }

func (m *Main) printJSON(v any) error { return cli.PrintJSON(m.Stdout, v) }

func splitList(s string) []string { return cli.SplitList(s) }
