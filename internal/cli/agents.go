package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/registry"
)

// agentView is the part of the API's agent the CLI shows.
type agentView struct {
	AgentID      string   `json:"agent_id"`
	Namespace    string   `json:"namespace"`
	Capabilities []string `json:"capabilities"`
	Aliases      []string `json:"aliases"`
	Endpoint     string   `json:"endpoint"`
	Protocol     string   `json:"protocol"`
	Mode         string   `json:"mode"`
	// InboxDepth is how many attempts wait unclaimed in a pull agent's
	// inbox; the API leaves it out for push agents.
	InboxDepth      *int           `json:"inbox_depth,omitempty"`
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
	Recent           *registry.Recent `json:"recent,omitempty"`
	SelfPreservation *preservation    `json:"self_preservation,omitempty"`
	Hold             string           `json:"hold,omitempty"`
	PausedUntil      *time.Time       `json:"paused_until,omitempty"`
	Recovery         *struct {
		LastMS        *float64 `json:"last_ms"`
		Mean24hMS     *float64 `json:"mean_24h_ms"`
		Recoveries24h int      `json:"recoveries_24h"`
	} `json:"recovery,omitempty"`
	RecentRestarts int     `json:"recent_restarts"`
	ProbesNeeded   int     `json:"probes_needed"`
	FlapPenalty    float64 `json:"flap_penalty"`
}

// mode is the agent's mode, push when the API names none (a server from
// before pull agents).
func (a agentView) mode() string {
	if a.Mode == "" {
		return "push"
	}
	return a.Mode
}

// pull reports whether the agent claims its work rather than being called.
func (a agentView) pull() bool { return a.Mode == "pull" }

// inboxDepth is the attempts waiting in a pull agent's inbox, 0 when the
// API did not say.
func (a agentView) inboxDepth() int {
	if a.InboxDepth == nil {
		return 0
	}
	return *a.InboxDepth
}

// preservation is a namespace's open self-preservation episode.
type preservation struct {
	Namespace string    `json:"namespace"`
	Since     time.Time `json:"since"`
	Until     time.Time `json:"until"`
	Agents    int       `json:"agents"`
	Lapsing   int       `json:"lapsing"`
}

func (p preservation) line(now time.Time) string {
	return fmt.Sprintf("self-preservation in namespace %s since %s: %d of %d agents lapsed and are kept from going DOWN; it ends %s at the latest",
		p.Namespace, p.Since.Format(time.RFC3339), p.Lapsing, p.Agents, Until(p.Until, now))
}

// Until says how far t is from now, never as a negative countdown: "in
// 4.2s", or "4.2s ago" once it passed.
func Until(t, now time.Time) string {
	d := t.Sub(now).Round(100 * time.Millisecond)
	if d < 0 {
		return (-d).String() + " ago"
	}
	return "in " + d.String()
}

// NextLeaseChange says when the lease sweep next moves an agent on its own
// for want of heartbeats: a HEALTHY agent turns SUSPECT at half its TTL
// since the last heartbeat, a SUSPECT one DOWN at the TTL. Other states,
// and a change already due (the next sweep makes it), say so.
func NextLeaseChange(state string, lastHeartbeat time.Time, ttl time.Duration, now time.Time) string {
	var to string
	var at time.Time
	switch state {
	case "HEALTHY":
		to, at = "SUSPECT", lastHeartbeat.Add(ttl/2)
	case "SUSPECT", "PROBING":
		to, at = "DOWN", lastHeartbeat.Add(ttl)
	default:
		return ""
	}
	if !at.After(now) {
		return to + " at the next sweep (a heartbeat is overdue)"
	}
	return to + " " + Until(at, now) + " without a heartbeat"
}

const agentsHelp = `agentreach agents: list agents, and an operator's actions on one (--key or AGENTREACH_KEY, --server or AGENTREACH_URL)

  agentreach agents [--namespace NS] [--capability C] [--state S]
  agentreach agents drain AGENT_ID [--reason R]   no new work; what it holds finishes, then OFFLINE, until up
  agentreach agents down AGENT_ID [--reason R]    confirm it down: no traffic until up (registrations keep it down)
  agentreach agents up AGENT_ID [--reason R]      end its probe window, or lift a down or a drain
  agentreach agents update AGENT_ID [--weight N] [--rollout-percent N] [--max-concurrent N] [--aliases a,b]
  agentreach dig AGENT_ID                         everything about one agent

An agent id registered in several namespaces is named with --namespace.
Every command takes --server, --key and --json (the service's answer, as
the API gives it). "agentreach agents COMMAND -h" lists a command's flags.

`

// usageWith makes fs print text, then its flags, as its usage.
func usageWith(fs *Flags, text string) *Flags {
	fs.Usage = func() { fmt.Fprint(fs.Output(), text); fs.PrintDefaults() }
	return fs
}

// Agents lists agents: agentreach agents [--namespace] [--capability] [--state] [--json].
func Agents(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 {
		switch {
		case IsHelp(args[0]):
			fmt.Fprint(env.Stdout, agentsHelp)
			return nil
		case args[0] == "drain", args[0] == "down", args[0] == "up", args[0] == "update":
			return Operate(ctx, env, args[0], args[1:])
		}
	}
	fs, c := APIFlags(env, "agents")
	usageWith(fs, agentsHelp)
	q := url.Values{}
	ns := fs.String("namespace", "", "only this namespace")
	capability := fs.String("capability", "", "only agents with this capability")
	state := fs.String("state", "", "only agents in this state")
	if err := ParseFlags(fs.FlagSet, args); err != nil {
		return err
	}
	if fs.NArg() > 0 { // not a list with a word the flag package stopped at
		return fmt.Errorf("%w: unknown agents command %q: agentreach agents [--namespace NS] [--capability C] [--state S], "+
			"or agents drain|down|up|update AGENT_ID", ErrUsage, fs.Arg(0))
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
		return PrintRaw(env.Stdout, raw)
	}
	var body struct {
		Agents           []agentView    `json:"agents"`
		SelfPreservation []preservation `json:"self_preservation"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tNAMESPACE\tMODE\tSTATE\tIN-FLIGHT\tINBOX\tBREAKER\tLAST HEARTBEAT\tCAPABILITIES")
	for _, a := range body.Agents {
		inbox := "-" // a push agent has no inbox
		if a.pull() {
			inbox = fmt.Sprint(a.inboxDepth())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AgentID, a.Namespace, a.mode(), a.State, a.InFlight, inbox,
			a.Breaker.State, Ago(a.LastHeartbeatAt), strings.Join(a.Capabilities, ","))
	}
	if len(body.Agents) == 0 {
		fmt.Fprintln(tw, "(no agents)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range body.SelfPreservation {
		fmt.Fprintln(env.Stdout, p.line(time.Now()))
	}
	return nil
}

// Dig shows one agent in depth: agentreach dig AGENT_ID [--namespace NS] [--json].
func Dig(ctx context.Context, env Env, args []string) error {
	fs, c := APIFlags(env, "dig")
	usageWith(fs, "agentreach dig AGENT_ID [--namespace NS] [--json]: everything about one agent (state, lease, breaker, route hits, recent outcomes)\n\n")
	ns := fs.String("namespace", "", "the agent's namespace, when its id is in several")
	pos, err := fs.ParsePositional(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: agentreach dig AGENT_ID [--namespace NS] [--json] [--server URL]", ErrUsage)
	}
	q := url.Values{}
	if *ns != "" {
		q.Set("namespace", *ns)
	}
	var raw json.RawMessage
	if err := c.Get(ctx, "/v1/agents/"+url.PathEscape(pos[0]), q, &raw); err != nil {
		return namespaceHint(err)
	}
	if fs.JSON {
		return PrintRaw(env.Stdout, raw)
	}
	var a agentView
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
	row := func(k, format string, v ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, v...)...) }
	row("agent", "%s (namespace %s)", a.AgentID, a.Namespace)
	row("state", "%s since %s", a.State, Ago(a.StateChangedAt))
	if r := a.Recovery; r != nil && r.LastMS != nil {
		mean := "-"
		if r.Mean24hMS != nil {
			mean = (time.Duration(*r.Mean24hMS) * time.Millisecond).Round(100 * time.Millisecond).String()
		}
		row("time to recover", "last %s, mean %s over %d recoveries in 24h",
			(time.Duration(*r.LastMS) * time.Millisecond).Round(100*time.Millisecond), mean, r.Recoveries24h)
	}
	a.holdRows(row)
	if a.pull() {
		row("mode", "pull (claims its work; no endpoint)")
		row("inbox", "%d waiting to be claimed", a.inboxDepth())
	} else {
		row("mode", "push")
		row("endpoint", "%s (%s)", a.Endpoint, a.Protocol)
	}
	now := time.Now()
	row("lease", "expires %s (%s), ttl %ds", a.LeaseExpiresAt.Format(time.RFC3339), Until(a.LeaseExpiresAt, now), a.TTLSeconds)
	if next := NextLeaseChange(a.State, a.LastHeartbeatAt, time.Duration(a.TTLSeconds)*time.Second, now); next != "" {
		row("next change", "%s", next)
	}
	if p := a.SelfPreservation; p != nil {
		row("self-preservation", "%s", p.line(now))
	}
	row("last heartbeat", "%s", Ago(a.LastHeartbeatAt))
	row("capabilities", "%s", strings.Join(a.Capabilities, ", "))
	if len(a.Aliases) > 0 {
		row("aliases", "%s", strings.Join(a.Aliases, ", "))
	}
	row("load", "%d in flight (max %s)", a.InFlight, maxText(a.MaxConcurrent))
	breaker := a.Breaker.State + ", no attempts yet: no error rate" // n/a, not 0 %
	if a.Breaker.Attempts > 0 {
		breaker = fmt.Sprintf("%s, %.0f%% errors over %d attempts", a.Breaker.State, 100*a.Breaker.ErrorRate, a.Breaker.Attempts)
	}
	if a.Breaker.RetryAt != nil {
		breaker += ", probe at " + a.Breaker.RetryAt.Format(time.RFC3339)
	}
	row("breaker", "%s", breaker)
	if r := a.Recent; r != nil {
		row("route hits", "%d routed in the last %s", r.Routed, r.Window)
		row("recent health", "%d attempted, %d delivered, %d succeeded, %d failed, %d timed out (reach %s, success %s)",
			r.Attempted, r.Delivered, r.Succeeded, r.Failed, r.TimedOut, rate(r.ReachRate, r.Attempted), rate(r.Success, r.Succeeded+r.Failed+r.TimedOut))
	}
	if len(a.Context) > 0 {
		b, _ := json.Marshal(a.Context)
		row("context", "%s", b)
	}
	return tw.Flush()
}

// namespaceHint adds to the API's answer that an agent id is in several
// namespaces the flag that names one (the API says "?namespace=").
func namespaceHint(err error) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict && apiErr.Field == "namespace" {
		return fmt.Errorf("%w (on the command line: --namespace NS)", err)
	}
	return err
}

// rate shows a share of n attempts, "n/a" when there were none: a rate of
// nothing is no figure, not 0 %.
func rate(v float64, n int) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func maxText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// holdRows are dig's rows of what keeps work from the agent for a while:
// flapping, an operator's hold, the agent's own pause.
func (a *agentView) holdRows(row func(name, format string, args ...any)) {
	if a.RecentRestarts >= 3 {
		row("flapping", "%d restarts in the last hour: %d probes in a row to leave PROBING, score %.1f now (halving every 10m)",
			a.RecentRestarts, a.ProbesNeeded, -a.FlapPenalty)
	}
	if a.Hold != "" {
		row("operator hold", "%s (lifted by `agentreach agents up` only)", a.Hold)
	}
	if a.PausedUntil != nil {
		row("paused", "until %s: it answered 429 or 503 with Retry-After (no new work until then; not a failure)",
			a.PausedUntil.UTC().Format(time.RFC3339))
	}
}
