package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentreach/agentreach/a2a"
)

// ServeCard serves namespace ns's Agent Card, with an ETag and a max-age so
// readers can revalidate cheaply. The card is public, as A2A discovery
// needs; it names skills, never agents or jobs.
func (s *Server) ServeCard(w http.ResponseWriter, r *http.Request, ns string) error {
	body, err := json.Marshal(s.Card(ns))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "public, max-age=60")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

// Card is namespace ns's Agent Card, for callers of either version: v0.3's
// url and preferredTransport, and v1.0's supportedInterfaces (JSON-RPC in
// 1.0, preferred, and in 0.3), all at /a2a/{ns}, which answers each call
// in the version its A2A-Version names.
func (s *Server) Card(ns string) a2a.Card {
	url := s.cfg.Jobs.PublicURL() + "/a2a/" + ns
	skills := []a2a.Skill{}
	for _, sk := range s.cfg.Jobs.Skills(ns) {
		skills = append(skills, a2a.Skill{ID: sk.Capability, Name: sk.Capability, Tags: append([]string{}, sk.Aliases...),
			Description: fmt.Sprintf("%s, routed by Agent-Reach to %d healthy agent(s) with retries, timeouts and dead-lettering", sk.Capability, sk.Agents)})
	}
	return a2a.Card{
		Name: "Agent-Reach (" + ns + ")",
		Description: "Agent-Reach reaches every agent registered in namespace " + ns + ": name a skill in the message's " +
			"metadata.skill, and the job is routed to the best healthy agent offering it, delivered durably, and its task answered here.",
		URL: url, PreferredTransport: "JSONRPC", ProtocolVersion: "0.3.0", Version: s.cfg.Version,
		Capabilities: a2a.Capabilities{PushNotifications: true, Streaming: true, StateTransitionHistory: true,
			ExtendedAgentCard: true},
		DefaultInputModes:  []string{"application/json", "text/plain"},
		DefaultOutputModes: []string{"application/json", "text/plain"},
		Skills:             skills,
		SecuritySchemes:    map[string]a2a.SecurityScheme{"api_key": {Type: "http", Scheme: "Bearer", Description: "an Agent-Reach API key"}},
		Security:           []a2a.SecurityRequirement{{"api_key": json.RawMessage("[]")}}, // no scopes
		SupportedInterfaces: []a2a.Interface{{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: VersionV1, Tenant: ns},
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: VersionV03, Tenant: ns}},
		SupportsAuthenticatedExtendedCard: true,
	}
}
