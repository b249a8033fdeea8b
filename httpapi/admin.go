package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
)

type createKeyRequest struct {
	Namespace  string   `json:"namespace"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	TTLSeconds int64    `json:"ttl_seconds"`
}

func (s *Server) createKey(c *gin.Context) {
	var req createKeyRequest
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > 10*365*24*3600 {
		_ = c.Error(Invalid("ttl_seconds", "must be between 0 (no expiry) and ten years"))
		return
	}
	p := principal(c)
	key, info, err := s.deps.Auth.Create(c.Request.Context(), auth.NewKey{Namespace: req.Namespace, Name: req.Name,
		Scopes: req.Scopes, TTL: time.Duration(req.TTLSeconds) * time.Second}, p, s.meta(c, p.Actor()))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"key": key, "key_info": toKeyInfo(info)})
}

func (s *Server) listKeys(c *gin.Context) {
	keys, err := s.deps.Auth.List(c.Request.Context(), principal(c))
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"keys": each(keys, toKeyInfo)})
}

func (s *Server) revokeKey(c *gin.Context) {
	p := principal(c)
	if err := s.deps.Auth.Revoke(c.Request.Context(), c.Param("key_id"), p, s.meta(c, p.Actor())); err != nil {
		_ = c.Error(err)
		return
	}
	c.Status(http.StatusNoContent)
}

type approvalPolicy struct {
	Namespace string   `json:"namespace"`
	Patterns  []string `json:"patterns"`
}

func (s *Server) getApprovalPolicy(c *gin.Context) {
	ns, err := readNamespace(c, c.Query("namespace"))
	if err != nil {
		_ = c.Error(err)
		return
	}
	own, configured, err := s.deps.Approvals.ApprovalPolicy(c.Request.Context(), ns)
	if err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"namespace": ns, "patterns": nonNil(own), "configured_patterns": nonNil(configured)})
}

func (s *Server) setApprovalPolicy(c *gin.Context) {
	var req approvalPolicy
	if err := bindJSON(c, &req, true); err != nil {
		_ = c.Error(err)
		return
	}
	p := principal(c)
	ns := req.Namespace
	if ns == "" {
		ns = p.Namespace
	}
	if ns != auth.AllNamespaces || p.Namespace != auth.AllNamespaces {
		if _, err := defaultNamespace(c, ns); err != nil {
			_ = c.Error(err)
			return
		}
	}
	if err := s.deps.Approvals.SetApprovalPolicy(c.Request.Context(), ns, req.Patterns, s.meta(c, p.Actor())); err != nil {
		_ = c.Error(err)
		return
	}
	c.JSON(http.StatusOK, approvalPolicy{Namespace: ns, Patterns: nonNil(req.Patterns)})
}
