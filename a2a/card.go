package a2a

import "encoding/json"

// Well-known paths of an Agent Card: the current one, and the one of A2A
// v0.1/v0.2, tried when the current one is not there.
const (
	CardPath       = "/.well-known/agent-card.json"
	LegacyCardPath = "/.well-known/agent.json"
)

// Card is an Agent Card, of either version: v0.3 names its main interface
// with url and preferredTransport (more in additionalInterfaces), v1.0
// lists supportedInterfaces, the first preferred. Agent-Reach reads agents'
// cards into it and writes its own from it. Security requirements, whose
// shape differs between the versions, are kept as they come.
type Card struct {
	AdditionalInterfaces              []Interface               `json:"additionalInterfaces,omitempty"`
	Capabilities                      Capabilities              `json:"capabilities"`
	DefaultInputModes                 []string                  `json:"defaultInputModes"`
	DefaultOutputModes                []string                  `json:"defaultOutputModes"`
	Description                       string                    `json:"description"`
	Name                              string                    `json:"name"`
	PreferredTransport                string                    `json:"preferredTransport,omitempty"`
	ProtocolVersion                   string                    `json:"protocolVersion"`
	Security                          []SecurityRequirement     `json:"security,omitempty"`
	SecuritySchemes                   map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	Skills                            []Skill                   `json:"skills"`
	SupportedInterfaces               []Interface               `json:"supportedInterfaces,omitempty"`
	SupportsAuthenticatedExtendedCard bool                      `json:"supportsAuthenticatedExtendedCard,omitempty"`
	URL                               string                    `json:"url"`
	Version                           string                    `json:"version"`
}

// Interface is one way to reach an agent: v0.3 names its transport, v1.0
// its protocol binding (and a tenant).
type Interface struct {
	ProtocolBinding string `json:"protocolBinding,omitempty"` // v1.0
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	Tenant          string `json:"tenant,omitempty"`    // v1.0
	Transport       string `json:"transport,omitempty"` // v0.3
	URL             string `json:"url"`
}

// Capabilities are what an agent offers beyond a plain request: streaming,
// push notifications, its tasks' history of states (v0.3), an extended
// card for authenticated callers (v1.0; v0.3 says so at the card's top).
type Capabilities struct {
	ExtendedAgentCard      bool `json:"extendedAgentCard,omitempty"`
	PushNotifications      bool `json:"pushNotifications,omitempty"`
	StateTransitionHistory bool `json:"stateTransitionHistory,omitempty"`
	Streaming              bool `json:"streaming,omitempty"`
}

// Skill is one thing an agent does.
type Skill struct {
	Description string   `json:"description"`
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Tags        []string `json:"tags"`
	// Examples are requests the skill serves, in words.
	Examples []string `json:"examples,omitempty"`
}

// SecurityScheme is how a caller authenticates, as v0.3 spells an HTTP
// scheme (type "http", scheme "Bearer").
type SecurityScheme struct {
	BearerFormat string `json:"bearerFormat,omitempty"`
	Description  string `json:"description,omitempty"`
	Scheme       string `json:"scheme,omitempty"`
	Type         string `json:"type,omitempty"`
}

// SecurityRequirement names the schemes a caller must satisfy, each with
// its scopes (v0.3: a list of scope names).
type SecurityRequirement map[string]json.RawMessage
