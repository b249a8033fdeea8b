package card

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/domain"
)

// Mapping is what a card means for an agent's registration.
type Mapping struct {
	Name         string
	Capabilities []string
	Aliases      []string
	Version      string
	Endpoint     string
	// Push says whether the agent sends push notifications; without them
	// Agent-Reach polls GetTask.
	Push      bool
	Streaming bool
	// ProtocolVersion is the A2A version the card declares.
	ProtocolVersion string
	// Docs are what the skills say of each capability (name, description,
	// examples, tags), clipped to the catalogue's limits: the capability
	// catalogue's words. Left out of the fingerprint when empty, so a card
	// that says nothing more hashes as it always did.
	Docs map[string]domain.CapabilityDoc `json:",omitempty"`
}

// ErrCard is a card that cannot be used: not JSON, no skill that makes a
// capability, or no JSON-RPC interface.
var ErrCard = domain.NewError(domain.ErrInvalid, "unusable agent card")

// Parse decodes a card of either version.
func Parse(b []byte) (*a2a.Card, error) {
	var c a2a.Card
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: not a JSON agent card: %w", ErrCard, err)
	}
	return &c, nil
}

// Map turns a card into registration fields: skill ids become
// capabilities, skill tags aliases (each only if it is a well-formed
// capability name), each skill's name, description, examples and tags the
// catalogue's words of its capability, the card's version the agent's
// version, and its preferred JSON-RPC interface the endpoint. A card
// without either is ErrCard.
func Map(c *a2a.Card) (Mapping, error) {
	m := Mapping{Name: c.Name, Version: c.Version, Push: c.Capabilities.PushNotifications,
		Streaming: c.Capabilities.Streaming, ProtocolVersion: c.ProtocolVersion}
	for _, s := range c.Skills {
		if domain.ValidCapability(s.ID) && !slices.Contains(m.Capabilities, s.ID) {
			m.Capabilities = append(m.Capabilities, s.ID)
			if d := (domain.CapabilityDoc{Title: s.Name, Description: s.Description, Examples: s.Examples, Tags: s.Tags}).Clip(); !d.Empty() {
				if m.Docs == nil {
					m.Docs = map[string]domain.CapabilityDoc{}
				}
				m.Docs[s.ID] = d
			}
		}
	}
	for _, s := range c.Skills {
		for _, t := range s.Tags {
			if domain.ValidCapability(t) && !slices.Contains(m.Capabilities, t) && !slices.Contains(m.Aliases, t) {
				m.Aliases = append(m.Aliases, t)
			}
		}
	}
	if len(m.Capabilities) == 0 {
		return m, fmt.Errorf("%w: no skill has an id usable as a capability (letters, digits, '_', '-', joined by '.', ':' or '/')", ErrCard)
	}
	m.Endpoint = jsonRPCURL(c)
	if m.Endpoint == "" {
		return m, fmt.Errorf("%w: the card offers no JSON-RPC interface", ErrCard)
	}
	if len(m.Aliases) > domain.MaxAliases {
		m.Aliases = m.Aliases[:domain.MaxAliases]
	}
	if len(m.Capabilities) > domain.MaxCapabilities {
		for _, c := range m.Capabilities[domain.MaxCapabilities:] {
			delete(m.Docs, c)
		}
		m.Capabilities = m.Capabilities[:domain.MaxCapabilities]
	}
	return m, nil
}

// jsonRPCURL is the URL of the card's preferred interface if it speaks
// JSON-RPC, else of the first one that does.
func jsonRPCURL(c *a2a.Card) string {
	for _, i := range c.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, "JSONRPC") || strings.EqualFold(i.Transport, "JSONRPC") {
			return i.URL
		}
	}
	if c.URL != "" && (c.PreferredTransport == "" || strings.EqualFold(c.PreferredTransport, "JSONRPC")) {
		return c.URL
	}
	for _, i := range c.AdditionalInterfaces {
		if strings.EqualFold(i.Transport, "JSONRPC") || strings.EqualFold(i.ProtocolBinding, "JSONRPC") {
			return i.URL
		}
	}
	return ""
}

// Hash fingerprints what the registry takes from a card, so a refresh
// can tell whether anything that matters changed.
func (m Mapping) Hash() []byte {
	b, _ := json.Marshal(m)
	h := sha256.Sum256(b)
	return h[:]
}
