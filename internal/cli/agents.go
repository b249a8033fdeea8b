package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sdk/client"
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
	d := t.Sub(now)
	if d < 0 {
		return HumanDuration(-d) + " ago"
	}
	return "in " + HumanDuration(d)
}

// HumanDuration writes d as a person reads it, to the precision its size
// deserves and without zero units: "450ms", "4.2s", "2m30s", "1h",
// "1h5m", "2d3h" (not Go's "1h0m0s").
func HumanDuration(d time.Duration) string {
	if d < 0 {
		return "-" + HumanDuration(max(-d, 0)) // -MinInt64 overflows to itself
	}
	unit := func(n time.Duration, s string) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprint(int64(n)) + s
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'g', 2, 64) + "ms"
	case d < time.Second-time.Millisecond/2:
		return unit(d.Round(time.Millisecond)/time.Millisecond, "ms")
	case d < time.Minute-50*time.Millisecond:
		return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + "s"
	case d < time.Hour-time.Second/2:
		d = d.Round(time.Second)
		return unit(d/time.Minute, "m") + unit(d%time.Minute/time.Second, "s")
	case d < 24*time.Hour-time.Minute/2:
		d = d.Round(time.Minute)
		return unit(d/time.Hour, "h") + unit(d%time.Hour/time.Minute, "m")
	}
	d = d.Round(time.Hour)
	return unit(d/(24*time.Hour), "d") + unit(d%(24*time.Hour)/time.Hour, "h")
}

// humanWindow writes a window as the API names it ("1h0m0s") humanly,
// or as it came when it is no Go duration.
func humanWindow(w string) string {
	d, err := time.ParseDuration(w)
	if err != nil {
		return w
	}
	return HumanDuration(d)
}

// since is how long ago t was, humanly; "-" for no time.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return HumanDuration(now.Sub(t)) + " ago"
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

  agentreach agents [list] [--namespace NS] [--capability C] [--state S] [--watch]
  agentreach agents drain AGENT_ID [--reason R]   no new work; what it holds finishes, then OFFLINE, until up
  agentreach agents down AGENT_ID [--reason R]    confirm it down: no traffic until up (registrations keep it down)
  agentreach agents up AGENT_ID [--reason R]      end its probe window, or lift a down or a drain
  agentreach agents update AGENT_ID [--weight N] [--rollout-percent N] [--max-concurrent N] [--aliases a,b]
  agentreach dig AGENT_ID                         everything about one agent

--watch keeps the table on screen, redrawn as the registry changes (the
service's watch feed, and every 2s), until Ctrl-C; with --json, the list
on a line of its own each time it changes. An agent id registered in
several namespaces is named with --namespace.
Every command takes --server, --key and --json (the service's answer, as
the API gives it). "agentreach agents COMMAND -h" lists a command's flags.

`

// usageWith makes fs print text, then its flags, as its usage.
func usageWith(fs *Flags, text string) *Flags {
	fs.Usage = func() { fmt.Fprint(fs.Output(), text); fs.PrintDefaults() }
	return fs
}

// Agents lists agents: agentreach agents [list] [--namespace] [--capability] [--state] [--watch] [--json].
func Agents(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 {
		switch {
		case IsHelp(args[0]):
			fmt.Fprint(env.Stdout, agentsHelp)
			return nil
		case args[0] == "list":
			args = args[1:]
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
	watch := fs.Bool("watch", false, "redraw the table as it changes, until Ctrl-C (--json: the list on a line each time it changes)")
	if err := ParseFlags(fs.FlagSet, args); err != nil {
		return err
	}
	if fs.NArg() > 0 { // not a list with a word the flag package stopped at
		return UsageMistake(fs.FlagSet, fmt.Errorf("%w: unknown agents command %q: agentreach agents [--namespace NS] [--capability C] [--state S], "+
			"or agents drain|down|up|update AGENT_ID", ErrUsage, fs.Arg(0)))
	}
	for k, v := range map[string]string{"namespace": *ns, "capability": *capability, "state": *state} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *watch {
		return watchAgents(ctx, env, fs, c, q)
	}
	raw, body, err := listAgents(ctx, c, q)
	if err != nil {
		return err
	}
	if fs.JSON {
		return PrintRaw(env.Stdout, raw)
	}
	_, err = io.WriteString(env.Stdout, body.table(env.paletteFor(env.Stdout, false), time.Now()))
	return err
}

// agentList is the API's list of agents.
type agentList struct {
	Agents           []agentView    `json:"agents"`
	SelfPreservation []preservation `json:"self_preservation"`
}

// listAgents answers the API's list of agents with the filters q, raw and
// read.
func listAgents(ctx context.Context, c *Client, q url.Values) (json.RawMessage, agentList, error) {
	var raw json.RawMessage
	if err := c.Get(ctx, "/v1/agents", q, &raw); err != nil {
		return nil, agentList{}, err
	}
	var body agentList
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, agentList{}, fmt.Errorf("the service's list of agents: %w", err)
	}
	return raw, body, nil
}

// table is the list as agents prints it: a row per agent, then the open
// self-preservation episodes.
func (l agentList) table(p palette, now time.Time) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "AGENT\tNAMESPACE\tMODE\t%s\tIN-FLIGHT\tINBOX\t%s\tLAST HEARTBEAT\tCAPABILITIES\n", p.cell("STATE"), p.cell("BREAKER"))
	for _, a := range l.Agents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AgentID, a.Namespace, a.mode(), p.cell(a.State), a.InFlight, a.inbox(),
			p.cell(BreakerWord(a.Breaker.State)), Ago(a.LastHeartbeatAt), strings.Join(a.Capabilities, ","))
	}
	if len(l.Agents) == 0 {
		fmt.Fprintln(tw, "(no agents)")
	}
	_ = tw.Flush() // a strings.Builder takes every write
	for _, sp := range l.SelfPreservation {
		fmt.Fprintln(&b, sp.line(now))
	}
	return b.String()
}

// key is what the table shows but for the times, which change on their
// own: two lists with the same key show the same agents in the same
// states.
func (l agentList) key() string {
	var b strings.Builder
	for _, a := range l.Agents {
		fmt.Fprintf(&b, "%s/%s %s %s %d %s %s %s\n", a.Namespace, a.AgentID, a.mode(), a.State, a.InFlight, a.inbox(), a.Breaker.State,
			strings.Join(a.Capabilities, ","))
	}
	for _, sp := range l.SelfPreservation {
		fmt.Fprintf(&b, "preserving %s %d/%d\n", sp.Namespace, sp.Lapsing, sp.Agents)
	}
	return b.String()
}

// inbox is the INBOX cell: a pull agent's inbox depth, "-" for a push
// agent, which has no inbox.
func (a agentView) inbox() string {
	if a.pull() {
		return fmt.Sprint(a.inboxDepth())
	}
	return "-"
}

// watchEvery is how often agents --watch lists the agents when the watch
// feed says nothing: in-flight counts and inbox depths change without an
// event.
const watchEvery = 2 * time.Second

// watchAgents is agents --watch: it lists the agents, then again at each
// change the service's watch feed (GET /v1/agents/watch) reports and every
// watchEvery, and shows the list when it changed; on a terminal it redraws
// the table in place each time (its times move on), elsewhere it prints it
// again only when it changed. A feed the key may not read leaves the
// polling. It ends quietly when ctx does (Ctrl-C).
func watchAgents(ctx context.Context, env Env, fs *Flags, c *Client, q url.Values) error {
	changed := make(chan struct{}, 1)
	sc, err := c.sdk(client.OnAgentChange(func(client.AgentChange) {
		select {
		case changed <- struct{}{}:
		default: // a list is already due
		}
	}))
	if err != nil {
		return err
	}
	defer func() { _ = sc.Close() }() // it sent nothing to flush
	sc.Watch(ctx)
	redraw := IsTerminal(env.Stdout) && !fs.JSON
	p := env.paletteFor(env.Stdout, fs.JSON)
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	shown := ""
	for first := true; ; first = false {
		raw, body, err := listAgents(ctx, c, q)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if key := body.key(); first || redraw || key != shown {
			shown = key
			if err := showAgents(env.Stdout, fs.JSON, redraw, first, p, raw, body); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// showAgents writes one list of agents --watch: with --json the API's
// answer on a line; on a terminal the table redrawn from the top of the
// screen; elsewhere the table after a line saying when.
func showAgents(w io.Writer, jsonOut, redraw, first bool, p palette, raw json.RawMessage, body agentList) error {
	if jsonOut {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return fmt.Errorf("the service's list of agents: %w", err)
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
	now := time.Now()
	var b strings.Builder
	switch {
	case redraw:
		b.WriteString("\x1b[H\x1b[2J") // home, clear the screen
	case !first:
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "agents at %s (watching; Ctrl-C to stop)\n", now.Format("15:04:05"))
	b.WriteString(body.table(p, now))
	_, err := io.WriteString(w, b.String())
	return err
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
		return UsageMistake(fs.FlagSet, fmt.Errorf("%w: agentreach dig AGENT_ID [--namespace NS] [--json] [--server URL]", ErrUsage))
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
	now := time.Now()
	row("state", "%s since %s", env.paletteFor(env.Stdout, false).word(a.State, a.State), since(a.StateChangedAt, now))
	if r := a.Recovery; r != nil && r.LastMS != nil {
		mean := "-"
		if r.Mean24hMS != nil {
			mean = HumanDuration(time.Duration(*r.Mean24hMS * float64(time.Millisecond)))
		}
		row("time to recover", "last %s, mean %s over %d recoveries in 24h",
			HumanDuration(time.Duration(*r.LastMS*float64(time.Millisecond))), mean, r.Recoveries24h)
	}
	a.holdRows(row)
	if a.pull() {
		row("mode", "pull (claims its work; no endpoint)")
		row("inbox", "%d waiting to be claimed", a.inboxDepth())
	} else {
		row("mode", "push")
		row("endpoint", "%s (%s)", a.Endpoint, a.Protocol)
	}
	row("lease", "expires %s (%s), ttl %ds", a.LeaseExpiresAt.Format(time.RFC3339), Until(a.LeaseExpiresAt, now), a.TTLSeconds)
	if next := NextLeaseChange(a.State, a.LastHeartbeatAt, time.Duration(a.TTLSeconds)*time.Second, now); next != "" {
		row("next change", "%s", next)
	}
	if p := a.SelfPreservation; p != nil {
		row("self-preservation", "%s", p.line(now))
	}
	row("last heartbeat", "%s", since(a.LastHeartbeatAt, now))
	row("capabilities", "%s", strings.Join(a.Capabilities, ", "))
	if len(a.Aliases) > 0 {
		row("aliases", "%s", strings.Join(a.Aliases, ", "))
	}
	row("load", "%d in flight (max %s)", a.InFlight, maxText(a.MaxConcurrent))
	row("breaker", "%s", a.breakerText(breakerWindow(ctx, c, a.Namespace)))
	if r := a.Recent; r != nil {
		row("route hits", "%d routed in the last %s", r.Routed, humanWindow(r.Window))
		row("recent health", "%d attempted, %d delivered, %d succeeded, %d failed, %d timed out (reached %s, answered OK of attempts %s)",
			r.Attempted, r.Delivered, r.Succeeded, r.Failed, r.TimedOut, rate(r.ReachRate, r.Attempted), rate(r.Success, r.Succeeded+r.Failed+r.TimedOut))
	}
	if len(a.Context) > 0 {
		b, _ := json.Marshal(a.Context)
		row("context", "%s", b)
	}
	return tw.Flush()
}

// BreakerWord names a breaker state in words: "half-open" for half_open.
func BreakerWord(state string) string { return strings.ReplaceAll(state, "_", "-") }

// breakerWindow is the namespace's breaker window from its routing policy,
// 0 when the key may not read the policy (an admin's) or it failed: the
// breaker's figures are then said to be over "its window".
func breakerWindow(ctx context.Context, c *Client, namespace string) time.Duration {
	var p struct {
		BreakerWindowS int `json:"breaker_window_s"`
	}
	if err := c.Get(ctx, "/v1/policies/routing", url.Values{"namespace": {namespace}}, &p); err != nil {
		return 0
	}
	return time.Duration(p.BreakerWindowS) * time.Second
}

// breakerText is dig's breaker row: its state in words, and its error
// rate over its window (window, 0 when unknown). An empty window is "no
// attempts in the last 1m", not "no attempts yet": the agent may have had
// many before it, which the hour's count then says.
func (a agentView) breakerText(window time.Duration) string {
	b := a.Breaker
	over := "its window (breaker_window_s of the routing policy)"
	if window > 0 {
		over = "the last " + HumanDuration(window)
	}
	text := fmt.Sprintf("%s, %.0f%% errors over %d attempts in %s", BreakerWord(b.State), 100*b.ErrorRate, b.Attempts, over)
	if b.Attempts == 0 { // n/a, not 0 %
		text = fmt.Sprintf("%s, no attempts in %s: no error rate", BreakerWord(b.State), over)
		if r := a.Recent; r != nil {
			text += fmt.Sprintf(" (%d attempted in the last %s)", r.Attempted, humanWindow(r.Window))
		}
	}
	if b.RetryAt != nil {
		text += ", probe at " + b.RetryAt.Format(time.RFC3339)
	}
	return text
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
