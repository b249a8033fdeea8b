package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
)

// The capability catalogue and intent resolution: GET /v1/capabilities,
// GET and PUT /v1/capabilities/{name}, POST /v1/resolve.

// capabilityDocJSON is what is said of a capability: in a registration's
// capability_info, in an operator's PUT.
type capabilityDocJSON struct {
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Examples    []string `json:"examples"`
	Tags        []string `json:"tags"`
	// InputSchema is the payload's JSON Schema (an object schema): the
	// input schema of the capability's MCP tool.
	InputSchema json.RawMessage `json:"input_schema"`
}

func (d capabilityDocJSON) doc() domain.CapabilityDoc {
	return domain.CapabilityDoc{Title: d.Title, Description: d.Description, Examples: d.Examples, Tags: d.Tags, InputSchema: d.InputSchema}
}

// capabilityDocs converts a registration's capability_info.
func capabilityDocs(in map[string]capabilityDocJSON) map[string]domain.CapabilityDoc {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]domain.CapabilityDoc, len(in))
	for c, d := range in {
		out[c] = d.doc()
	}
	return out
}

type noteJSON struct {
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Examples    []string        `json:"examples"`
	Tags        []string        `json:"tags"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	UpdatedBy   string          `json:"updated_by"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

type capabilityJSON struct {
	Namespace        string    `json:"namespace"`
	CatalogueVersion int64     `json:"catalogue_version"`
	Name             string    `json:"name"`
	Title            string    `json:"title"`
	Description      string    `json:"description"`
	Examples         []string  `json:"examples"`
	Tags             []string  `json:"tags"`
	Agents           []string  `json:"agents"`
	Note             *noteJSON `json:"note,omitempty"`
	// InputSchema is the payload's schema (the operator's, else the newest
	// registration's); SchemaWarning says when agents disagree.
	InputSchema   json.RawMessage `json:"input_schema,omitempty"`
	SchemaWarning string          `json:"schema_warning,omitempty"`
}

func toCapabilityJSON(ns string, version int64, e domain.CatalogueEntry) capabilityJSON {
	out := capabilityJSON{Namespace: ns, CatalogueVersion: version, Name: e.Name, Title: e.Title, Description: e.Description,
		Examples: nonNil(e.Examples), Tags: nonNil(e.Tags), Agents: nonNil(e.Agents), InputSchema: e.InputSchema, SchemaWarning: e.SchemaWarning}
	if n := e.Note; n != nil {
		out.Note = &noteJSON{Title: n.Doc.Title, Description: n.Doc.Description, Examples: nonNil(n.Doc.Examples),
			Tags: nonNil(n.Doc.Tags), InputSchema: n.Doc.InputSchema, UpdatedBy: n.UpdatedBy, UpdatedAt: n.UpdatedAt.UTC()}
	}
	return out
}

type intentCandidateJSON struct {
	Capability string   `json:"capability"`
	Score      float64  `json:"score"`
	Matched    []string `json:"matched,omitempty"`
}

func toCandidatesJSON(in []domain.IntentCandidate) []intentCandidateJSON {
	out := make([]intentCandidateJSON, len(in))
	for i, c := range in {
		out[i] = intentCandidateJSON{Capability: c.Capability, Score: c.Score, Matched: c.Matched}
	}
	return out
}

type intentStepJSON struct {
	Resolver   string  `json:"resolver"`
	Model      string  `json:"model,omitempty"`
	Outcome    string  `json:"outcome"`
	Confidence float64 `json:"confidence"`
	Threshold  float64 `json:"threshold"`
	Top        string  `json:"top,omitempty"`
	Cached     bool    `json:"cached,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// resolutionJSON is a resolution as the API shows it (POST /v1/resolve,
// GET /v1/route?intent=), the same shape as INTENT_RESOLVED's data.
type resolutionJSON struct {
	Intent           string                `json:"intent"`
	Namespace        string                `json:"namespace"`
	Capability       string                `json:"capability"`
	Resolver         string                `json:"resolver"`
	Model            string                `json:"model,omitempty"`
	Confidence       float64               `json:"confidence"`
	Threshold        float64               `json:"threshold"`
	Reason           string                `json:"reason"`
	Cached           bool                  `json:"cached,omitempty"`
	CatalogueVersion int64                 `json:"catalogue_version"`
	Candidates       []intentCandidateJSON `json:"candidates"`
	Steps            []intentStepJSON      `json:"steps"`
}

func toResolutionJSON(r domain.IntentResolution) *resolutionJSON {
	out := &resolutionJSON{Intent: r.Intent, Namespace: r.Namespace, Capability: r.Capability, Resolver: r.Resolver, Model: r.Model,
		Confidence: r.Confidence, Threshold: r.Threshold, Reason: r.Reason, Cached: r.Cached, CatalogueVersion: r.CatalogueVersion,
		Candidates: toCandidatesJSON(r.Candidates), Steps: make([]intentStepJSON, len(r.Steps))}
	for i, s := range r.Steps {
		out.Steps[i] = intentStepJSON{Resolver: s.Resolver, Model: s.Model, Outcome: s.Outcome, Confidence: s.Confidence,
			Threshold: s.Threshold, Top: s.Top, Cached: s.Cached, Error: s.Error}
	}
	return out
}

// catalogueScope, after need(""), admits keys that may read the
// catalogue: capabilities:read, or agents:read, which sees the same
// capabilities through the agents.
func catalogueScope(c *gin.Context) {
	if p := principal(c); !p.Has(auth.ScopeCapabilitiesRead) && !p.Has(auth.ScopeAgentsRead) {
		_ = c.Error(&Error{Code: CodePermissionDenied, Message: "this key lacks the scope " + auth.ScopeCapabilitiesRead})
		c.Abort()
		return
	}
	c.Next()
}

// capabilityName is the {name} of the path: a capability may hold '/', so
// the route takes the rest of the path.
func capabilityName(c *gin.Context) (string, error) {
	name := strings.TrimPrefix(c.Param("name"), "/")
	if !domain.ValidCapability(name) {
		return "", Invalid("name", "the path must name a capability, e.g. /v1/capabilities/parcel.track")
	}
	return name, nil
}

func (s *Server) listCapabilities(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	cat, err := s.deps.Intent.Catalogue(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	out := make([]capabilityJSON, len(cat.Entries))
	for i, e := range cat.Entries {
		out[i] = toCapabilityJSON(ns, cat.Version, e)
	}
	c.JSON(http.StatusOK, gin.H{"namespace": ns, "catalogue_version": cat.Version, "capabilities": out})
}

func (s *Server) getCapability(c *gin.Context) {
	name, err := capabilityName(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	e, v, err := s.deps.Intent.Entry(c.Request.Context(), ns, name)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toCapabilityJSON(ns, v, e))
}

type describeRequest struct {
	Namespace string `json:"namespace"`
	capabilityDocJSON
}

func (s *Server) putCapability(c *gin.Context) {
	name, err := capabilityName(c)
	if err != nil {
		_ = c.Error(err)
		return
	}
	var req describeRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := defaultNamespace(c, req.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	e, v, err := s.deps.Intent.Describe(c.Request.Context(), ns, name, req.doc(), s.meta(c, principal(c).Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toCapabilityJSON(ns, v, e))
}

type resolveRequest struct {
	Intent    string `json:"intent"`
	Namespace string `json:"namespace"`
}

// resolve answers POST /v1/resolve: the capability an intent resolves to,
// with the ranked candidates and every step's reason; 422
// ambiguous_intent with the suggestions when no resolver is confident.
func (s *Server) resolve(c *gin.Context) {
	var req resolveRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	ns, err := readNamespace(c, req.Namespace)
	if err != nil {
		_ = c.Error(err)
		return
	}
	res, err := s.deps.Intent.Resolve(c.Request.Context(), ns, req.Intent)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, toResolutionJSON(res))
}
