package main

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/agentreach/agentreach/internal/cli"
)

// cliEnv is what the commands of internal/ run with.
func (m *Main) cliEnv() cli.Env {
	return cli.Env{Stdout: m.Stdout, Stderr: m.Stderr, Getenv: m.Getenv, Stdin: os.Stdin}
}

// apiFlags are the flags and client of a command that calls the API.
func (m *Main) apiFlags(name string) (*cli.Flags, *cli.Client) { return cli.APIFlags(m.cliEnv(), name) }

func (m *Main) printJSON(v any) error { return cli.PrintJSON(m.Stdout, v) }

func splitList(s string) []string { return cli.SplitList(s) }

// commandTree is every command Run knows with its subcommands, for the
// completion scripts; "" stands for the group's own flags (agents lists
// the agents). Their flags are read from their help, so the scripts
// follow the flags as they change.
var commandTree = []struct {
	name string
	subs []string
}{
	{"serve", nil}, {"dev", nil}, {"migrate", nil},
	{"agents", []string{"", "list", "drain", "down", "up", "update"}},
	{"dig", nil}, {"mock-agent", nil}, {"a2a-agent", nil},
	{"projections", []string{"rebuild", "snapshot"}},
	{"archive", []string{"verify", "import"}},
	{"keys", []string{"create", "list", "revoke"}},
	{"jobs", []string{"submit", "get", "list", "events", "cancel", "replay"}},
	{"bench", nil}, {"chaos", nil}, {"verify", nil}, {"demo", nil},
	{"completion", []string{"bash", "zsh"}},
	{"version", nil}, {"help", nil},
}

// completionCommands is commandTree with each command's flags.
func (m *Main) completionCommands() []cli.Command {
	var cmds []cli.Command
	for _, c := range commandTree {
		cmd := cli.Command{Name: c.name}
		switch {
		case c.name == "completion" || c.name == "version" || c.name == "help":
			// no flags
		case c.subs == nil:
			cmd.Flags = m.flagsOf(c.name)
		}
		for _, s := range c.subs {
			switch {
			case c.name == "completion":
				cmd.Subs = append(cmd.Subs, cli.Command{Name: s})
			case s == "":
				cmd.Flags = m.flagsOf(c.name, "list")
			default:
				cmd.Subs = append(cmd.Subs, cli.Command{Name: s, Flags: m.flagsOf(c.name, s)})
			}
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// flagsOf answers the flags the help of `agentreach args... -h` lists. It
// runs with an empty environment: only the flags' names are kept.
func (m *Main) flagsOf(args ...string) []string {
	var help bytes.Buffer
	h := &Main{Stdout: &help, Stderr: io.Discard, Getenv: func(string) string { return "" }, started: make(chan struct{})}
	_ = h.Run(context.Background(), append(args, "-h")) // help: flag.ErrHelp
	return cli.FlagsOf(help.String())
}
