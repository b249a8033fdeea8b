package httpapi

import (
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
	ns := req.Namespace
	if ns == "" {
		ns = p.Namespace
	}
	if ns == auth.AllNamespaces {
		_ = c.Error(Invalid("namespace", "name the namespace whose routing policy this is"))
		return
	}
	if !domain.ValidNamespace(ns) {
		_ = c.Error(Invalid("namespace", "not a namespace"))
		return
	}
	if _, err := defaultNamespace(c, ns); err != nil {
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
