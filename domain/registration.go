package domain

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Agent event types, on the agent's own stream: the registry's audit trail.
const (
	EventAgentRegistered   EventType = "AGENT_REGISTERED"
	EventAgentStateChanged EventType = "AGENT_STATE_CHANGED"
	EventAgentDeregistered EventType = "AGENT_DEREGISTERED"
	// EventHealthDegraded and EventHealthRecovered mark an agent crossing
	// the alert thresholds, once per crossing.
	EventHealthDegraded  EventType = "HEALTH_DEGRADED"
	EventHealthRecovered EventType = "HEALTH_RECOVERED"
	// EventSelfPreservation goes on the namespace's registry stream when
	// most of its agents lapse in one sweep and the sweep holds off.
	EventSelfPreservation EventType = "SELF_PRESERVATION"
)

// AgentStreamPrefix starts the stream id of every agent.
const AgentStreamPrefix = "agent:"

// AgentStream is the event stream of an agent: agent:<namespace>/<id>.
func AgentStream(k AgentKey) string { return AgentStreamPrefix + k.String() }

// AgentKey names an agent. Each namespace has its own agent ids, so an id
// is an agent's only within its namespace.
type AgentKey struct {
	Namespace string
	ID        string
}

// String is "namespace/id" (neither may hold a '/').
func (k AgentKey) String() string { return k.Namespace + "/" + k.ID }

// RegistryStream is the stream of registry-wide facts of a namespace.
func RegistryStream(namespace string) string { return "registry:" + namespace }

// Protocols an agent can speak.
const (
	ProtocolHTTP = "http"
	ProtocolA2A  = "a2a"
	// ProtocolMCP: an MCP server, its tools its capabilities, each
	// delivery a tools/call.
	ProtocolMCP = "mcp"
)

// How an agent gets its work.
const (
	// ModePush: Agent-Reach POSTs each delivery to the agent's endpoint.
	ModePush = "push"
	// ModePull: the agent has no endpoint; it claims its deliveries
	// (POST /v1/agents/{id}/claim). It needs no probe: its first claim
	// proves it can serve and makes it HEALTHY.
	ModePull = "pull"
)

// Registration limits and defaults.
const (
	DefaultNamespace      = "default"
	DefaultTTLSeconds     = 30
	MinTTLSeconds         = 5
	MaxTTLSeconds         = 3600
	DefaultWeight         = 50
	MaxCapabilities       = 64
	MaxAliases            = 64
	MaxCapabilityLength   = 128
	MaxMaxConcurrent      = 100000
	DefaultRolloutPercent = 100
)

// AgentRegistration is what an agent says about itself when it registers.
type AgentRegistration struct {
	AgentID      string   `json:"agent_id"`
	Namespace    string   `json:"namespace"`
	Capabilities []string `json:"capabilities"`
	Aliases      []string `json:"aliases,omitempty"`
	Endpoint     string   `json:"endpoint"`
	HealthURL    string   `json:"health_url,omitempty"`
	Protocol     string   `json:"protocol"`
	// Mode is how the agent gets its work: ModePush (the default) or
	// ModePull.
	Mode string `json:"mode,omitempty"`
	// ProtocolVersion is the version of its protocol the agent speaks
	// ("1.0" for A2A v1.0); a caller may require one (constraints).
	ProtocolVersion string         `json:"protocol_version,omitempty"`
	Weight          int            `json:"weight"`
	MaxConcurrent   int            `json:"max_concurrent"`
	Version         string         `json:"version,omitempty"`
	RolloutPercent  int            `json:"rollout_percent"`
	TTLSeconds      int            `json:"ttl_seconds"`
	Context         map[string]any `json:"context,omitempty"`
	Metadata        map[string]any `json:"metadata,omitempty"`
	// CapabilityInfo says what some of its capabilities do (a description,
	// examples of requests), by capability: words for the catalogue that
	// intent resolution reads. Optional; an A2A card's skills fill it.
	CapabilityInfo map[string]CapabilityDoc `json:"capability_info,omitempty"`
}

// AgentRegistered is the data of an AGENT_REGISTERED event.
type AgentRegistered struct {
	AgentRegistration
	InstanceID string `json:"instance_id"`
	Restart    bool   `json:"restart"`
}

// AgentStateChanged is the data of an AGENT_STATE_CHANGED event.
type AgentStateChanged struct {
	From   AgentState  `json:"from"`
	To     AgentState  `json:"to"`
	Signal AgentSignal `json:"signal"`
	Reason string      `json:"reason,omitempty"`
}

// SelfPreservationEntered is the data of a SELF_PRESERVATION event.
type SelfPreservationEntered struct {
	Namespace string `json:"namespace"`
	Total     int    `json:"total"`
	Lapsing   int    `json:"lapsing"`
	// Since is when the episode began, on the registry's clock (zero in
	// events written before it was recorded: the event's own time).
	Since time.Time `json:"since,omitzero"`
}

// FieldError is bad input: which field, and what is wrong with it.
type FieldError struct {
	Field   string
	Message string
	// TooLarge says the field is over its size limit: the API answers
	// 413 payload_too_large rather than 400.
	TooLarge bool
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

var (
	agentIDRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	namespaceRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	capabilityRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*([.:/][A-Za-z0-9][A-Za-z0-9_-]*)*$`)
)

// ValidCapability reports whether c is a well-formed capability: segments of
// letters, digits, '_' and '-', joined by '.', ':' or '/', at most 128
// characters; for example "document:parse:ocr" or "weather.forecast".
func ValidCapability(c string) bool {
	return len(c) <= MaxCapabilityLength && capabilityRe.MatchString(c)
}

// ValidNamespace reports whether ns is a well-formed namespace: lower-case
// letters, digits, '_' and '-', starting with a letter or digit, at most 63.
func ValidNamespace(ns string) bool { return namespaceRe.MatchString(ns) }

// ValidAgentID reports whether id is a well-formed agent id: letters,
// digits, '.', '_', ':' and '-', starting with a letter or digit, at most 128.
func ValidAgentID(id string) bool { return agentIDRe.MatchString(id) }

// ValidateHTTPURL checks that raw is an absolute http(s) URL with a host.
func ValidateHTTPURL(field, raw string) *FieldError {
	if raw == "" {
		return fieldErr(field, "is required")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return fieldErr(field, "must be an absolute http or https URL")
	}
	if u.User != nil {
		return fieldErr(field, "must not carry credentials")
	}
	if len(raw) > 2048 {
		return fieldErr(field, "must be at most 2048 characters")
	}
	return nil
}

// Key names the registered agent.
func (r *AgentRegistration) Key() AgentKey { return AgentKey{Namespace: r.Namespace, ID: r.AgentID} }

// Normalize fills defaults and checks every field, returning the first
// problem as a *FieldError. It changes r only by filling defaults and
// dropping duplicate capabilities and aliases.
func (r *AgentRegistration) Normalize() error {
	if !ValidAgentID(r.AgentID) {
		return fieldErr("agent_id", "must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit")
	}
	if r.Namespace == "" {
		r.Namespace = DefaultNamespace
	}
	if !ValidNamespace(r.Namespace) {
		return fieldErr("namespace", "must be 1-63 lower-case letters, digits, '_' or '-'")
	}
	if len(r.Capabilities) == 0 {
		return fieldErr("capabilities", "must list at least one capability")
	}
	if len(r.Capabilities) > MaxCapabilities {
		return fieldErr("capabilities", "must list at most %d capabilities", MaxCapabilities)
	}
	r.Capabilities = dedupe(r.Capabilities)
	for _, c := range r.Capabilities {
		if !ValidCapability(c) {
			return fieldErr("capabilities", "%q is not a capability: use segments of letters, digits, '_' or '-' joined by '.', ':' or '/' (at most %d characters), e.g. document:parse:ocr", c, MaxCapabilityLength)
		}
	}
	if err := r.normalizeDocs(); err != nil {
		return err
	}
	if len(r.Aliases) > MaxAliases {
		return fieldErr("aliases", "must list at most %d aliases", MaxAliases)
	}
	r.Aliases = dedupe(r.Aliases)
	for _, a := range r.Aliases {
		if strings.TrimSpace(a) == "" || len(a) > MaxCapabilityLength {
			return fieldErr("aliases", "each alias must be 1-%d characters", MaxCapabilityLength)
		}
	}
	if err := r.normalizeReach(); err != nil {
		return err
	}
	if len(r.ProtocolVersion) > 32 || !versionTextRe.MatchString(r.ProtocolVersion) {
		return fieldErr("protocol_version", "must be at most 32 letters, digits, '.', '-' or '+', e.g. 1.0")
	}
	if r.Weight == 0 {
		r.Weight = DefaultWeight
	}
	if r.Weight < 1 || r.Weight > 100 {
		return fieldErr("weight", "must be between 1 and 100")
	}
	if r.MaxConcurrent < 0 || r.MaxConcurrent > MaxMaxConcurrent {
		return fieldErr("max_concurrent", "must be between 0 (unlimited) and %d", MaxMaxConcurrent)
	}
	if len(r.Version) > 64 {
		return fieldErr("version", "must be at most 64 characters")
	}
	if r.RolloutPercent < 0 || r.RolloutPercent > 100 {
		return fieldErr("rollout_percent", "must be between 0 and 100")
	}
	if r.TTLSeconds == 0 {
		r.TTLSeconds = DefaultTTLSeconds
	}
	if r.TTLSeconds < MinTTLSeconds || r.TTLSeconds > MaxTTLSeconds {
		return fieldErr("ttl_seconds", "must be between %d and %d", MinTTLSeconds, MaxTTLSeconds)
	}
	return nil
}

// normalizeReach checks how the agent is reached: a push agent has an
// endpoint (and may have a health URL) and speaks http or a2a; a pull agent
// has neither URL and speaks http (the Reach envelope).
func (r *AgentRegistration) normalizeReach() error {
	switch r.Mode {
	case "":
		r.Mode = ModePush
	case ModePush, ModePull:
	default:
		return fieldErr("mode", "must be push or pull")
	}
	if r.Protocol == "" {
		r.Protocol = ProtocolHTTP
	}
	if r.Protocol != ProtocolHTTP && r.Protocol != ProtocolA2A && r.Protocol != ProtocolMCP {
		return fieldErr("protocol", "must be http, a2a or mcp")
	}
	if r.Mode == ModePull {
		switch {
		case r.Endpoint != "":
			return fieldErr("endpoint", "must be empty for a pull agent: it claims its work (POST /v1/agents/{id}/claim)")
		case r.HealthURL != "":
			return fieldErr("health_url", "must be empty for a pull agent: its claims prove it alive")
		case r.Protocol != ProtocolHTTP:
			return fieldErr("protocol", "must be http for a pull agent: claims answer Reach envelopes")
		}
		return nil
	}
	if err := ValidateHTTPURL("endpoint", r.Endpoint); err != nil {
		return err
	}
	if r.HealthURL != "" {
		if err := ValidateHTTPURL("health_url", r.HealthURL); err != nil {
			return err // not a typed nil
		}
	}
	return nil
}

// Pull reports whether the agent claims its work.
func (r *AgentRegistration) Pull() bool { return r.Mode == ModePull }

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// HealthReport is what a heartbeat may say of the agent's own health
// besides the work it holds; a nil field was not reported.
type HealthReport struct {
	InFlight    *int     `json:"in_flight,omitempty"`
	QueueLength *int     `json:"queue_length,omitempty"`
	ErrorRate   *float64 `json:"error_rate,omitempty"`
	PoolUsage   *float64 `json:"pool_usage,omitempty"`
}

// MaxQueueLength bounds a reported queue length.
const MaxQueueLength = 10_000_000

// Validate checks each reported figure, returning the first problem as a
// *FieldError: counts from 0, rates and usage in 0..1.
func (h HealthReport) Validate() error {
	if h.InFlight != nil && (*h.InFlight < 0 || *h.InFlight > MaxMaxConcurrent) {
		return fieldErr("in_flight", "must be between 0 and %d", MaxMaxConcurrent)
	}
	if h.QueueLength != nil && (*h.QueueLength < 0 || *h.QueueLength > MaxQueueLength) {
		return fieldErr("queue_length", "must be between 0 and %d", MaxQueueLength)
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"error_rate", h.ErrorRate}, {"pool_usage", h.PoolUsage}} {
		if f.v != nil && !(*f.v >= 0 && *f.v <= 1) { // also refuses NaN
			return fieldErr(f.name, "must be a fraction between 0 and 1")
		}
	}
	return nil
}

// versionTextRe is what a protocol version may be made of ("" included).
var versionTextRe = regexp.MustCompile(`^[0-9A-Za-z.+-]*$`)
