package registry

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/domain"
	mcpclient "github.com/agentreach/agentreach/mcp/client"
	"github.com/agentreach/agentreach/sql/queries"
)

// The agents that are MCP servers ("protocol": "mcp"): their tools are
// their capabilities, read at registration and again every third of the
// lease (each read that answers renews the lease: an MCP server sends no
// heartbeats); their headers (credentials) are kept apart from the agent's
// row and never shown.

var (
	qMCPInsertServer  = queries.Must("MCPInsertServer")
	qMCPForgetServer  = queries.Must("MCPForgetServer")
	qMCPServersDue    = queries.Must("MCPServersDue")
	qMCPRefreshed     = queries.Must("MCPRefreshed")
	qMCPRefreshFailed = queries.Must("MCPRefreshFailed")
	qMCPServerOf      = queries.Must("MCPServerOf")
	qMCPServersOfNS   = queries.Must("MCPServersOfNamespace")
)

// MaxMCPHeaders bounds the headers of an MCP server's requests.
const MaxMCPHeaders = 16

// mcpClient is the client the registry reads tools with (the card
// fetcher's guarded HTTP client).
func (r *Registry) mcpClient() mcpclient.Client {
	return mcpclient.Client{HTTP: r.cardHTTP, Version: "agent-reach"}
}

// checkMCPHeaders checks the headers an MCP server's requests carry.
func checkMCPHeaders(h map[string]string) error {
	if len(h) > MaxMCPHeaders {
		return &domain.FieldError{Field: "headers", Message: fmt.Sprintf("at most %d headers", MaxMCPHeaders)}
	}
	for k, v := range h {
		if k == "" || len(k) > 128 || len(v) > 4096 || http.CanonicalHeaderKey(k) == "Host" || http.CanonicalHeaderKey(k) == "Content-Length" {
			return &domain.FieldError{Field: "headers", Message: fmt.Sprintf("%q: a header name of at most 128 bytes (not Host or Content-Length) and a value of at most 4096", k)}
		}
	}
	return nil
}

// MCPTools maps an MCP server's tools to the capabilities it offers, with
// what it says of each (title, description, input schema): only tools
// whose names are capabilities, and of those only the ones named in want
// when want is not empty (each of which must be a tool).
func MCPTools(tools []mcpclient.ToolDef, want []string) ([]string, map[string]domain.CapabilityDoc, error) {
	var caps []string
	docs := map[string]domain.CapabilityDoc{}
	byName := map[string]mcpclient.ToolDef{}
	for _, t := range tools {
		byName[t.Name] = t
	}
	for _, w := range want {
		if _, ok := byName[w]; !ok {
			return nil, nil, &domain.FieldError{Field: "capabilities", Message: fmt.Sprintf("%q is not a tool of the MCP server (tools/list)", w)}
		}
	}
	for _, t := range tools {
		if !domain.ValidCapability(t.Name) || len(want) > 0 && !slices.Contains(want, t.Name) {
			continue
		}
		caps = append(caps, t.Name)
		d := domain.CapabilityDoc{Title: t.Title, Description: t.Description, InputSchema: t.InputSchema}
		if d.Normalize("") != nil {
			d = domain.CapabilityDoc{Description: d.Description}.Clip()
		}
		if !d.Empty() {
			docs[t.Name] = d
		}
	}
	if len(caps) == 0 {
		return nil, nil, &domain.FieldError{Field: "endpoint", Message: "the MCP server lists no tool whose name can be a capability"}
	}
	return caps, docs, nil
}

// stillTools are the picked tools the server still lists: a picked tool
// it dropped is dropped from the agent; none left is a read that failed.
func stillTools(picked []string, tools []mcpclient.ToolDef) []string {
	if len(picked) == 0 {
		return nil
	}
	out := []string{}
	for _, p := range picked {
		if slices.ContainsFunc(tools, func(t mcpclient.ToolDef) bool { return t.Name == p }) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return picked // MCPTools names the first as no tool of the server
	}
	return out
}

func toolsHash(caps []string, docs map[string]domain.CapabilityDoc) []byte {
	b, _ := json.Marshal(struct {
		C []string
		D map[string]domain.CapabilityDoc
	}{caps, docs})
	h := sha256.Sum256(b)
	return h[:]
}

// mcpInfo is what an MCP server agent's metadata keeps under "mcp": its
// URL, its tools, and the names (never the values) of its headers.
func mcpInfo(url string, caps []string, headers map[string]string) map[string]any {
	names := slices.Sorted(maps.Keys(headers))
	if names == nil {
		names = []string{}
	}
	return map[string]any{"url": url, "tools": caps, "headers": names}
}

// RegisterMCP registers an MCP server as an agent: it lists the server's
// tools at reg.Endpoint (with headers on every request), makes each tool
// whose name is a capability one of the agent's (only those of
// reg.Capabilities when it names some) with the tool's title, description
// and input schema as the catalogue's words, and keeps the headers apart.
// A server that cannot be reached, or lists no usable tool, is a
// *domain.FieldError on endpoint.
func (r *Registry) RegisterMCP(ctx context.Context, reg domain.AgentRegistration, headers map[string]string, md domain.Metadata) (*Agent, string, error) {
	reg.Protocol = domain.ProtocolMCP
	if err := checkMCPHeaders(headers); err != nil {
		return nil, "", err
	}
	if err := domain.ValidateHTTPURL("endpoint", reg.Endpoint); err != nil {
		return nil, "", err
	}
	if err := CheckURLs(ctx, r.cfg.Guard, map[string]string{"endpoint": reg.Endpoint}); err != nil {
		return nil, "", err
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	tools, err := r.mcpClient().ListTools(lctx, mcpclient.Endpoint{URL: reg.Endpoint, Headers: headers})
	cancel()
	if err != nil {
		return nil, "", &domain.FieldError{Field: "endpoint", Message: "its tools cannot be listed: " + err.Error()}
	}
	caps, docs, err := MCPTools(tools, reg.Capabilities)
	if err != nil {
		return nil, "", err
	}
	var picked []string // nil: every tool, now and at later reads
	if len(reg.Capabilities) > 0 {
		picked = caps
	}
	reg.Capabilities = caps
	for c, d := range reg.CapabilityInfo { // what the registration says wins over the server's words
		docs[c] = d
	}
	reg.CapabilityInfo = docs
	if reg.Metadata == nil {
		reg.Metadata = map[string]any{}
	}
	reg.Metadata["mcp"] = mcpInfo(reg.Endpoint, caps, headers)
	if headers == nil {
		headers = map[string]string{}
	}
	hj, _ := json.Marshal(headers)
	now := r.now().UTC()
	a, token, err := r.register(ctx, reg, md, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qForgetAgentCard, reg.Namespace, reg.AgentID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, qMCPInsertServer, reg.Namespace, reg.AgentID, reg.Endpoint, hj, toolsHash(caps, docs), now,
			now.Add(mcpInterval(reg.TTLSeconds)), picked)
		return err
	})
	if err == nil {
		r.mcpServers.forget(domain.AgentKey{Namespace: reg.Namespace, ID: reg.AgentID})
	}
	return a, token, err
}

// mcpInterval is how often an MCP server's tools are read: a third of its
// lease, so that two reads in a row may fail before it lapses.
func mcpInterval(ttl int) time.Duration {
	return max(time.Duration(ttl)*time.Second/3, time.Second)
}

// MCPEndpoint answers where MCP server agent k is and the headers its
// requests carry, read from the database at most every 10 s.
func (r *Registry) MCPEndpoint(ctx context.Context, k domain.AgentKey) (mcpclient.Endpoint, error) {
	if ep, ok := r.mcpServers.get(k, r.now()); ok {
		return ep, nil
	}
	var ep mcpclient.Endpoint
	err := r.pool.QueryRow(ctx, qMCPServerOf, k.Namespace, k.ID).Scan(&ep.URL, &ep.Headers)
	if errors.Is(err, pgx.ErrNoRows) {
		return ep, fmt.Errorf("agent %s is not an MCP server: %w", k, domain.ErrNotFound)
	}
	if err != nil {
		return ep, err
	}
	r.mcpServers.put(k, ep, r.now())
	return ep, nil
}

// mcpCache holds MCP servers' endpoints for the deliveries.
type mcpCache struct {
	mu sync.Mutex
	m  map[domain.AgentKey]mcpCached
}

type mcpCached struct {
	ep    mcpclient.Endpoint
	until time.Time
}

func (c *mcpCache) get(k domain.AgentKey, now time.Time) (mcpclient.Endpoint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	return e.ep, ok && now.Before(e.until)
}

func (c *mcpCache) put(k domain.AgentKey, ep mcpclient.Endpoint, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > 10_000 {
		c.m = map[domain.AgentKey]mcpCached{}
	}
	c.m[k] = mcpCached{ep: ep, until: now.Add(10 * time.Second)}
}

func (c *mcpCache) forget(k domain.AgentKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// probeMCP is an MCP server agent's probe: its tools can be listed.
func (r *Registry) probeMCP(ctx context.Context, a *Agent) error {
	ep, err := r.MCPEndpoint(ctx, domain.AgentKey{Namespace: a.Namespace, ID: a.AgentID})
	if err != nil {
		return err
	}
	_, err = r.mcpClient().ListTools(ctx, ep)
	return err
}

type dueMCP struct {
	agent   domain.AgentKey
	ep      mcpclient.Endpoint
	hash    []byte
	ttlSecs int
	// picked are the tools its registration picked (none: every tool).
	picked []string
}

// RefreshMCPServers reads the tools of every MCP server that is due (up to
// 100, eight at a time): an answer renews the agent's lease, and changed
// tools change its capabilities (AGENT_CARD_UPDATED, the server's URL as
// the card's); a failure leaves the lease to lapse. It returns how many
// agents changed.
func (r *Registry) RefreshMCPServers(ctx context.Context) (int, error) {
	rows, err := r.pool.Query(ctx, qMCPServersDue, r.now().UTC())
	if err != nil {
		return 0, fmt.Errorf("MCP servers due: %w", err)
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dueMCP, error) {
		var d dueMCP
		return d, row.Scan(&d.agent.Namespace, &d.agent.ID, &d.ep.URL, &d.ep.Headers, &d.hash, &d.ttlSecs, &d.picked)
	})
	if err != nil {
		return 0, fmt.Errorf("MCP servers due: %w", err)
	}
	changed := refreshEach(r, ctx, due, func(d dueMCP) (bool, error) {
		ok, err := r.refreshMCP(ctx, d)
		if err != nil {
			r.logger.WarnContext(ctx, "MCP server refresh", "agent_id", d.agent.ID, "namespace", d.agent.Namespace, "url", d.ep.URL, "err", err)
		}
		return ok, err
	})
	return changed, nil
}

func (r *Registry) refreshMCP(ctx context.Context, d dueMCP) (bool, error) {
	now := r.now().UTC()
	next := now.Add(mcpInterval(d.ttlSecs))
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	tools, err := r.mcpClient().ListTools(lctx, d.ep)
	cancel()
	if err == nil {
		var caps []string
		var docs map[string]domain.CapabilityDoc
		if caps, docs, err = MCPTools(tools, stillTools(d.picked, tools)); err == nil {
			r.heartbeats.add(d.agent, now, domain.HealthReport{}) // it answered: the server is there
			return r.keepTools(ctx, d, caps, docs, now, next)
		}
	}
	_, uerr := r.pool.Exec(ctx, qMCPRefreshFailed, d.agent.Namespace, d.agent.ID, next, err.Error())
	return false, errors.Join(err, uerr)
}

// keepTools records a read of a server's tools: the next read, and the
// agent's capabilities and docs when they changed.
func (r *Registry) keepTools(ctx context.Context, d dueMCP, caps []string, docs map[string]domain.CapabilityDoc, now, next time.Time) (bool, error) {
	hash := toolsHash(caps, docs)
	if slices.Equal(hash, d.hash) {
		_, err := r.pool.Exec(ctx, qMCPRefreshed, d.agent.Namespace, d.agent.ID, now, next, hash)
		return false, err
	}
	err := r.store.InTx(ctx, func(tx pgx.Tx) error {
		a, err := r.load(ctx, tx, d.agent, true)
		if err != nil {
			return err
		}
		old, err := capabilityDocs(ctx, tx, d.agent)
		if err != nil {
			return err
		}
		from := domain.CardView{Capabilities: a.Capabilities, Aliases: orEmptySlice(a.Aliases), Version: a.Version, Endpoint: a.Endpoint, CapabilityInfo: old}
		to := domain.CardView{Capabilities: caps, Aliases: orEmptySlice(a.Aliases), Version: a.Version, Endpoint: a.Endpoint, CapabilityInfo: docs}
		recs, err := r.store.AppendTx(ctx, tx, domain.AgentStream(d.agent), a.StreamVersion,
			domain.NewEvent(domain.EventAgentCardUpdated, domain.AgentCardUpdated{CardURL: d.ep.URL, From: from, To: to},
				domain.Metadata{Actor: "registry:mcp_refresh"}))
		if err != nil {
			return err
		}
		meta := maps.Clone(a.Metadata)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["mcp"] = mcpInfo(d.ep.URL, caps, d.ep.Headers)
		mj, _ := json.Marshal(meta)
		if _, err := tx.Exec(ctx, qAgentOfCard, d.agent.ID, caps, orEmptySlice(a.Aliases), a.Version, a.Endpoint, mj, recs[0].Version,
			d.agent.Namespace); err != nil {
			return err
		}
		if err := writeDocsTx(ctx, tx, d.agent, docs); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qMCPRefreshed, d.agent.Namespace, d.agent.ID, now, next, hash)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("update the tools of agent %s: %w", d.agent, err)
	}
	r.logger.InfoContext(ctx, "MCP server's tools changed", "agent_id", d.agent.ID, "namespace", d.agent.Namespace, "capabilities", caps)
	return true, nil
}

// MCPServer is an MCP server agent as the registry read API shows it.
type MCPServer struct {
	AgentID                   string
	RegisteredAt, RefreshedAt time.Time
	State                     domain.AgentState
	Version, Description      string
	Tools                     []string
}

// MCPServers lists namespace ns's MCP server agents, by agent id.
func (r *Registry) MCPServers(ctx context.Context, ns string) ([]MCPServer, error) {
	rows, err := r.pool.Query(ctx, qMCPServersOfNS, ns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (MCPServer, error) {
		var s MCPServer
		err := row.Scan(&s.AgentID, &s.RegisteredAt, &s.RefreshedAt, &s.State, &s.Version, &s.Tools, &s.Description)
		return s, err
	})
}
