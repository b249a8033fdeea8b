package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentreach/agentreach/registry"
)

// apiClient is the CLI's client of the HTTP API.
type apiClient struct {
	base    string
	key     string
	http    *http.Client
	headers map[string]string // extra request headers (empty values are skipped)
}

// apiError is an error answer of the API, shown to the user as it is.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	if e.Field != "" {
		msg += " [field " + e.Field + "]"
	}
	return msg
}

// cliFlags are a command's flags plus the --json switch every CLI command has.
type cliFlags struct {
	*flag.FlagSet
	json bool
}

func (m *Main) apiFlags(name string) (*cliFlags, *apiClient) {
	fs := &cliFlags{FlagSet: m.newFlagSet(name)}
	c := &apiClient{http: &http.Client{Timeout: 15 * time.Second}}
	fs.StringVar(&c.base, "server", m.env("AGENTREACH_URL", "http://127.0.0.1:8080"), "Agent-Reach base URL (env AGENTREACH_URL)")
	fs.StringVar(&c.key, "key", m.Getenv("AGENTREACH_KEY"), "API key (env AGENTREACH_KEY)")
	fs.BoolVar(&fs.json, "json", false, "print JSON for scripts")
	return fs, c
}

// parse parses flags that may come before or after positional arguments
// (agentreach dig ID --json) and returns the positional ones.
func (fs *cliFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func (c *apiClient) get(ctx context.Context, path string, q url.Values, into any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodGet, path, nil, into)
}

// do sends a request with an optional JSON body and decodes a JSON answer
// into into (if not nil); an error answer becomes an *apiError.
func (c *apiClient) do(ctx context.Context, method, path string, body, into any) error {
	u := strings.TrimRight(c.base, "/") + path
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Agent-Reach at %s (start it with `agentreach dev`, or set --server / AGENTREACH_URL): %w", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var body struct {
			Error apiError `json:"error"`
		}
		_ = json.Unmarshal(b, &body)
		body.Error.Status = resp.StatusCode
		if body.Error.Code == "" {
			body.Error.Code, body.Error.Message = "http_error", strings.TrimSpace(string(b))
		}
		return &body.Error
	}
	if into == nil || len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, into)
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (m *Main) cliLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

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

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(100*time.Millisecond).String() + " ago"
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
	if err := c.get(ctx, "/v1/agents", q, &raw); err != nil {
		return err
	}
	if fs.json {
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
			ago(a.LastHeartbeatAt), strings.Join(a.Capabilities, ","))
	}
	if len(body.Agents) == 0 {
		fmt.Fprintln(tw, "(no agents)")
	}
	return tw.Flush()
}

func (m *Main) runDig(ctx context.Context, args []string) error {
	fs, c := m.apiFlags("dig")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: agentreach dig AGENT_ID [--json] [--server URL]", errUsage)
	}
	var raw json.RawMessage
	if err := c.get(ctx, "/v1/agents/"+url.PathEscape(pos[0]), nil, &raw); err != nil {
		return err
	}
	if fs.json {
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
	row("state", "%s since %s", a.State, ago(a.StateChangedAt))
	row("endpoint", "%s (%s)", a.Endpoint, a.Protocol)
	row("lease", "expires %s (in %s), ttl %ds", a.LeaseExpiresAt.Format(time.RFC3339), time.Until(a.LeaseExpiresAt).Round(100*time.Millisecond), a.TTLSeconds)
	row("last heartbeat", "%s", ago(a.LastHeartbeatAt))
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
