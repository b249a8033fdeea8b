package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/internal/cli"
	"github.com/agentreach/agentreach/registry"
)

// cliEnv is what the commands of internal/ run with.
func (m *Main) cliEnv() cli.Env {
	return cli.Env{Stdout: m.Stdout, Stderr: m.Stderr, Getenv: m.Getenv}
}

// apiFlags are the flags and client of a command that calls the API.
func (m *Main) apiFlags(name string) (*cli.Flags, *cli.Client) { return cli.APIFlags(m.cliEnv(), name) }

func (m *Main) printJSON(v any) error { return cli.PrintJSON(m.Stdout, v) }

func splitList(s string) []string { return cli.SplitList(s) }

// agentView is the part of the API's agent the CLI shows.
type agentView struct {
	AgentID         string         `json:"agent_id"`
	Namespace       string         `json:"namespace"`
	Capabilities    []string       `json:"capabilities"`
	Aliases         []string       `json:"aliases"`
	Endpoint        string         `json:"endpoint"`
	Protocol        string         `json:"protocol"`
	Version         string         `json:"version"`
	Weight          int            `json:"weight"`
	MaxConcurrent   int            `json:"max_concurrent"`
	State           string         `json:"state"`
	InFlight        int            `json:"in_flight"`
	TTLSeconds      int            `json:"ttl_seconds"`
	LastHeartbeatAt time.Time      `json:"last_heartbeat_at"`
	LeaseExpiresAt  time.Time      `json:"lease_expires_at"`
	StateChangedAt  time.Time      `json:"state_changed_at"`
	Context         map[string]any `json:"context"`
	Breaker         struct {
		State     string     `json:"state"`
		ErrorRate float64    `json:"error_rate"`
		Attempts  int        `json:"attempts"`
		RetryAt   *time.Time `json:"retry_at"`
	} `json:"breaker"`
	Recent *registry.Recent `json:"recent,omitempty"`
}

func (m *Main) runAgents(ctx context.Context, args []string) error {
	fs, c := m.apiFlags("agents")
	q := url.Values{}
	ns := fs.String("namespace", "", "only this namespace")
	capability := fs.String("capability", "", "only agents with this capability")
	state := fs.String("state", "", "only agents in this state")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for k, v := range map[string]string{"namespace": *ns, "capability": *capability, "state": *state} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var raw json.RawMessage
	if err := c.Get(ctx, "/v1/agents", q, &raw); err != nil {
		return err
	}
	if fs.JSON {
		_, err := m.Stdout.Write(append(raw, '\n'))
		return err
	}
	var body struct {
		Agents []agentView `json:"agents"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tNAMESPACE\tSTATE\tIN-FLIGHT\tBREAKER\tLAST HEARTBEAT\tCAPABILITIES")
	for _, a := range body.Agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.AgentID, a.Namespace, a.State, a.InFlight, a.Breaker.State,
			cli.Ago(a.LastHeartbeatAt), strings.Join(a.Capabilities, ","))
	}
	if len(body.Agents) == 0 {
		fmt.Fprintln(tw, "(no agents)")
	}
	return tw.Flush()
}

func (m *Main) runDig(ctx context.Context, args []string) error {
	fs, c := m.apiFlags("dig")
	pos, err := fs.ParsePositional(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: agentreach dig AGENT_ID [--json] [--server URL]", errUsage)
	}
	var raw json.RawMessage
	if err := c.Get(ctx, "/v1/agents/"+url.PathEscape(pos[0]), nil, &raw); err != nil {
		return err
	}
	if fs.JSON {
		_, err := m.Stdout.Write(append(raw, '\n'))
		return err
	}
	var a agentView
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(m.Stdout, 2, 4, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, v...)...) }
	row("agent", "%s (namespace %s)", a.AgentID, a.Namespace)
	row("state", "%s since %s", a.State, cli.Ago(a.StateChangedAt))
	row("endpoint", "%s (%s)", a.Endpoint, a.Protocol)
	row("lease", "expires %s (in %s), ttl %ds", a.LeaseExpiresAt.Format(time.RFC3339), time.Until(a.LeaseExpiresAt).Round(100*time.Millisecond), a.TTLSeconds)
	row("last heartbeat", "%s", cli.Ago(a.LastHeartbeatAt))
	row("capabilities", "%s", strings.Join(a.Capabilities, ", "))
	if len(a.Aliases) > 0 {
		row("aliases", "%s", strings.Join(a.Aliases, ", "))
	}
	row("load", "%d in flight (max %s)", a.InFlight, maxText(a.MaxConcurrent))
	breaker := fmt.Sprintf("%s, %.0f%% errors over %d attempts", a.Breaker.State, 100*a.Breaker.ErrorRate, a.Breaker.Attempts)
	if a.Breaker.RetryAt != nil {
		breaker += ", probe at " + a.Breaker.RetryAt.Format(time.RFC3339)
	}
	row("breaker", "%s", breaker)
	if r := a.Recent; r != nil {
		row("route hits", "%d routed in the last %s", r.Routed, r.Window)
		row("recent health", "%d attempted, %d delivered, %d succeeded, %d failed, %d timed out (reach %.1f%%, success %.1f%%)",
			r.Attempted, r.Delivered, r.Succeeded, r.Failed, r.TimedOut, 100*r.ReachRate, 100*r.Success)
	}
	if len(a.Context) > 0 {
		b, _ := json.Marshal(a.Context)
		row("context", "%s", b)
	}
	return tw.Flush()
}

func maxText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}
