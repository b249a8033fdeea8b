package card

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/agentreach/agentreach/domain"
)

// DefaultTTLSeconds is the lease of an agent registered by card when the
// registration names none: its card is fetched every third of it.
const DefaultTTLSeconds = 60

// Info is what the registry keeps of an agent's card in the agent's
// metadata (under "a2a"), so the router's snapshot and operators see it.
type Info struct {
	CardURL         string `json:"card_url"`
	Name            string `json:"name,omitempty"`
	Push            bool   `json:"push"`
	Streaming       bool   `json:"streaming"`
	ProtocolVersion string `json:"protocol_version,omitempty"`
}

// InfoOf reads the card facts out of an agent's metadata entry ("a2a"):
// false for an agent not registered by card.
func InfoOf(entry any) (Info, bool) {
	b, _ := json.Marshal(entry)
	var i Info
	return i, json.Unmarshal(b, &i) == nil && i.CardURL != ""
}

// Entry is the metadata entry ("a2a") of an agent whose card, at cardURL,
// means m.
func (m Mapping) Entry(cardURL string) map[string]any {
	out := map[string]any{"card_url": cardURL, "push": m.Push, "streaming": m.Streaming}
	if m.Name != "" {
		out["name"] = m.Name
	}
	if m.ProtocolVersion != "" {
		out["protocol_version"] = m.ProtocolVersion
	}
	return out
}

var slugRe = regexp.MustCompile(`[^a-z0-9._:-]+`)

// AgentID makes an agent id of a card's name.
func AgentID(name string) string {
	return strings.Trim(slugRe.ReplaceAllString(strings.ToLower(name), "-"), "-._:")
}

// Interval is how long until a card is fetched again: a third of the
// lease, so a live agent never lapses, or sooner when the card's own
// max-age says it may change sooner (at least a second).
func Interval(ttlSeconds int, maxAge time.Duration) time.Duration {
	d := time.Duration(ttlSeconds) * time.Second / 3
	if maxAge > 0 && maxAge < d {
		d = maxAge
	}
	return max(d, time.Second)
}

// CheckRegistration refuses a registration by card that names what the
// card says: a *domain.FieldError on card_url.
func CheckRegistration(reg domain.AgentRegistration) error {
	if len(reg.Capabilities) > 0 || reg.Endpoint != "" || reg.HealthURL != "" || (reg.Protocol != "" && reg.Protocol != domain.ProtocolA2A) {
		return &domain.FieldError{Field: "card_url", Message: "with card_url, capabilities, endpoint, health_url and protocol come from the card; leave them out"}
	}
	if len(reg.CapabilityInfo) > 0 {
		return &domain.FieldError{Field: "capability_info", Message: "with card_url, what each capability does comes from the card's skills; leave it out"}
	}
	return nil
}

// Resolve fetches the card at cardURL (or, for a base URL, at its
// well-known path, falling back to the legacy agent.json) and maps it. A
// card that cannot be fetched or used is a *domain.FieldError on card_url.
func Resolve(ctx context.Context, client *http.Client, cardURL string) (Fetched, Mapping, error) {
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	f, err := FetchFirst(fctx, client, cardURL)
	cancel()
	if err != nil {
		return f, Mapping{}, &domain.FieldError{Field: "card_url", Message: "cannot be read: " + err.Error()}
	}
	m, err := Map(f.Card)
	if err != nil {
		return f, m, &domain.FieldError{Field: "card_url", Message: err.Error()}
	}
	return f, m, nil
}

// Apply fills in what the card at f, meaning m, says of reg: its
// capabilities, aliases, what each capability does (capability_info), endpoint, protocol a2a, its URL as the health URL,
// its version unless reg names one, the agent id (made of the card's name
// unless reg names one), the default lease, and the card's facts in the
// metadata. A card without a name to make an id of is a *domain.FieldError
// on agent_id.
func Apply(f Fetched, m Mapping, reg domain.AgentRegistration) (domain.AgentRegistration, error) {
	if reg.Namespace == "" {
		reg.Namespace = domain.DefaultNamespace
	}
	if reg.AgentID == "" {
		reg.AgentID = AgentID(m.Name)
		if reg.AgentID == "" {
			return reg, &domain.FieldError{Field: "agent_id", Message: "is required: the card has no name to make one of"}
		}
	}
	reg.Capabilities, reg.Aliases, reg.Endpoint, reg.Protocol, reg.HealthURL = m.Capabilities, m.Aliases, m.Endpoint, domain.ProtocolA2A, f.URL
	reg.CapabilityInfo = maps.Clone(m.Docs)
	if reg.Version == "" {
		reg.Version = m.Version
	}
	if reg.ProtocolVersion == "" {
		reg.ProtocolVersion = m.ProtocolVersion
	}
	if reg.TTLSeconds == 0 {
		reg.TTLSeconds = DefaultTTLSeconds
	}
	reg.Metadata = maps.Clone(reg.Metadata)
	if reg.Metadata == nil {
		reg.Metadata = map[string]any{}
	}
	reg.Metadata["a2a"] = m.Entry(f.URL)
	return reg, nil
}

// Outcome is what a revalidation of a registered agent's card found.
type Outcome int

// Outcomes of a revalidation. Every outcome but Failed means the agent
// answered, which renews its lease.
const (
	// Failed: no usable answer; the agent's lease is left to lapse.
	Failed Outcome = iota
	// Unusable: the agent answered with a card that cannot be used; the
	// card it had stays.
	Unusable
	// NotModified: the card is as it was (304).
	NotModified
	// Unchanged: a card whose mapping is the one the agent has.
	Unchanged
	// Changed: a card whose mapping differs.
	Changed
)

// Revalidated is one revalidation of a card.
type Revalidated struct {
	Outcome Outcome
	Fetched Fetched
	Mapping Mapping
	// Err says why the outcome is Failed or Unusable.
	Err error
}

// Revalidate fetches the card at u again with etag, maps it, checks its
// endpoint with check (the registry's address guard), and compares its
// mapping with hash, the one registered.
func Revalidate(ctx context.Context, client *http.Client, u, etag string, hash []byte, check func(endpoint string) error) Revalidated {
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	f, err := Fetch(fctx, client, u, etag)
	cancel()
	rv := Revalidated{Fetched: f, Err: err}
	switch {
	case err != nil:
		return rv
	case f.NotModified:
		rv.Outcome = NotModified
		return rv
	}
	rv.Mapping, rv.Err = Map(f.Card)
	if rv.Err == nil {
		rv.Err = check(rv.Mapping.Endpoint)
	}
	switch {
	case rv.Err != nil:
		rv.Outcome = Unusable
	case bytes.Equal(rv.Mapping.Hash(), hash):
		rv.Outcome = Unchanged
	default:
		rv.Outcome = Changed
	}
	return rv
}
