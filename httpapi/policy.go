package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
)

// routingPolicyRequest is a PUT of a namespace's routing policy: every
// field named replaces the compiled-in default (not the current version),
// so the document is the whole policy.
type routingPolicyRequest struct {
	Namespace string `json:"namespace"`
	domain.RoutingPolicy
}

type routingPolicyResponse struct {
	Namespace string `json:"namespace"`
	domain.RoutingPolicy
}

func (s *Server) getRoutingPolicy(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	p, err := s.deps.Routing.RoutingPolicy(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, routingPolicyResponse{Namespace: ns, RoutingPolicy: p})
}

func (s *Server) setRoutingPolicy(c *gin.Context) {
	req := routingPolicyRequest{RoutingPolicy: domain.DefaultRoutingPolicy()}
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	p := principal(c)
	ns, err := policyNamespace(c, req.Namespace, "name the namespace whose routing policy this is")
	if err != nil {
		_ = c.Error(err)
		return
	}
	out, err := s.deps.Routing.SetRoutingPolicy(c.Request.Context(), ns, req.RoutingPolicy, s.meta(c, p.Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, routingPolicyResponse{Namespace: ns, RoutingPolicy: out})
}

// policyNamespace is the one namespace a PUT of a policy changes: the
// one asked for, or the key's; refused when it is every namespace (the
// error says what to do, whyAll), not a namespace, or not the key's.
func policyNamespace(c *gin.Context, asked, whyAll string) (string, error) {
	ns := asked
	if ns == "" {
		ns = principal(c).Namespace
	}
	if ns == auth.AllNamespaces {
		return "", Invalid("namespace", "%s", whyAll)
	}
	if !domain.ValidNamespace(ns) {
		return "", Invalid("namespace", "not a namespace")
	}
	if _, err := defaultNamespace(c, ns); err != nil {
		return "", err
	}
	return ns, nil
}

// Alerts is a namespace's alert webhooks (package alerting).
type Alerts interface {
	Policy(ctx context.Context, ns string) (domain.AlertPolicy, error)
	SetPolicy(ctx context.Context, ns string, p domain.AlertPolicy, md domain.Metadata) (domain.AlertPolicy, error)
}

type alertPolicyRequest struct {
	Namespace string `json:"namespace"`
	domain.AlertPolicy
}

type alertPolicyResponse struct {
	Namespace string `json:"namespace"`
	domain.AlertPolicy
}

// getAlertPolicy serves GET /v1/policies/alerts: the namespace's alert
// webhooks, routing keys hidden.
func (s *Server) getAlertPolicy(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	if ns == auth.AllNamespaces {
		_ = c.Error(Invalid("namespace", "name the namespace whose alert webhooks to show"))
		return
	}
	p, err := s.deps.Alerts.Policy(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, alertPolicyResponse{Namespace: ns, AlertPolicy: p.Shown()})
}

// setAlertPolicy serves PUT /v1/policies/alerts: the whole list of the
// namespace's alert webhooks, as its next version.
func (s *Server) setAlertPolicy(c *gin.Context) {
	var req alertPolicyRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	if req.Webhooks == nil {
		_ = c.Error(Invalid("webhooks", `required: the whole list of webhooks ([] for none)`))
		return
	}
	p := principal(c)
	ns, err := policyNamespace(c, req.Namespace, "name the namespace whose alert webhooks these are")
	if err != nil {
		_ = c.Error(err)
		return
	}
	out, err := s.deps.Alerts.SetPolicy(c.Request.Context(), ns, req.AlertPolicy, s.meta(c, p.Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, alertPolicyResponse{Namespace: ns, AlertPolicy: out.Shown()})
}
