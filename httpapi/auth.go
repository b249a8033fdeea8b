package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"

	"github.com/gin-gonic/gin"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/registry"
)

const principalKey = "principal"

// insecurePrincipal acts for requests without a key when auth is off.
var insecurePrincipal = &auth.Principal{KeyID: "insecure", Namespace: auth.AllNamespaces, Scopes: []string{auth.ScopeAdmin}}

// principal returns who the request acts for (set by need).
func principal(c *gin.Context) *auth.Principal {
	if p, ok := c.Get(principalKey); ok {
		return p.(*auth.Principal)
	}
	return nil
}

// authenticate resolves the request's API key, if any. Agent tokens
// (art_…) are checked by the routes that take them.
func (s *Server) authenticate(c *gin.Context) (*auth.Principal, error) {
	key := bearer(c)
	if key == "" && s.deps.Insecure {
		return insecurePrincipal, nil
	}
	return s.deps.Auth.Authenticate(c.Request.Context(), key)
}

// need admits requests whose key holds scope ("" = any valid key), and
// rate-limits them per key.
func (s *Server) need(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		addr := "addr:" + c.ClientIP()
		if blocked, wait := s.deps.FailLimiter.Blocked(addr); blocked && !s.deps.Auth.Known(bearer(c)) {
			_ = c.Error(&Error{Code: CodeRateLimited, Message: "too many failed authentications from this address",
				RetryAfter: int(math.Ceil(wait.Seconds()))})
			c.Abort()
			return
		}
		p, err := s.authenticate(c)
		if err != nil {
			if !errors.Is(err, auth.ErrNoKey) && errors.Is(err, domain.ErrUnauthenticated) {
				s.deps.FailLimiter.Allow(addr)
			}
			_ = c.Error(err)
			c.Abort()
			return
		}
		if scope != "" && !p.Has(scope) {
			_ = c.Error(&Error{Code: CodePermissionDenied, Message: "this key lacks the scope " + scope})
			c.Abort()
			return
		}
		if ok, wait := s.deps.Limiter.Allow(p.KeyID); !ok {
			_ = c.Error(&Error{Code: CodeRateLimited, Message: "too many requests for this key", RetryAfter: int(math.Ceil(wait.Seconds()))})
			c.Abort()
			return
		}
		c.Set(principalKey, p)
		c.Next()
	}
}

// agentOrKey admits a request with an agent token (checked by the handler)
// or with a key holding scope.
func (s *Server) agentOrKey(scope string) gin.HandlerFunc {
	keyed := s.need(scope)
	return func(c *gin.Context) {
		if isAgentToken(bearer(c)) {
			c.Next()
			return
		}
		keyed(c)
	}
}

// agentRate rate-limits the routes an agent's token takes, per token (the
// agent's identity there; a path id is the caller's to choose), as need
// does per key. A token that does not authenticate counts against the
// client address's budget of failures, as an unknown key does; an address
// over it is refused unless its token is known. Requests with an API key
// instead are need's.
func (s *Server) agentRate(c *gin.Context) {
	token := bearer(c)
	if !isAgentToken(token) {
		c.Next()
		return
	}
	addr := "addr:" + c.ClientIP()
	if blocked, wait := s.deps.FailLimiter.Blocked(addr); blocked && !s.deps.Agents.KnownToken(token) {
		_ = c.Error(&Error{Code: CodeRateLimited, Message: "too many failed authentications from this address",
			RetryAfter: int(math.Ceil(wait.Seconds()))})
		c.Abort()
		return
	}
	sum := sha256.Sum256([]byte(token))
	if ok, wait := s.deps.Limiter.Allow("agent:" + hex.EncodeToString(sum[:12])); !ok {
		_ = c.Error(&Error{Code: CodeRateLimited, Message: "too many requests for this agent", RetryAfter: int(math.Ceil(wait.Seconds()))})
		c.Abort()
		return
	}
	c.Next()
	for _, e := range c.Errors {
		var noAgent *registry.NoAgentError
		if errors.Is(e.Err, registry.ErrUnauthenticated) || errors.As(e.Err, &noAgent) {
			s.deps.FailLimiter.Allow(addr) // a token that did not authenticate
			break
		}
	}
}

func isAgentToken(t string) bool { return len(t) > 4 && t[:4] == "art_" }

// scopeNamespace is the namespace a request works in: the one asked for,
// which the key must see (else not found: a key never learns what another
// namespace holds), or the key's own.
func scopeNamespace(c *gin.Context, asked string) (string, error) {
	p := principal(c)
	switch {
	case asked == "" && p.Namespace != auth.AllNamespaces:
		return p.Namespace, nil
	case asked == "":
		return "", nil
	case !domain.ValidNamespace(asked):
		return "", Invalid("namespace", "not a namespace")
	case !p.Sees(asked):
		return "", NotFound("no namespace %q for this key", asked)
	}
	return asked, nil
}

// defaultNamespace is the namespace a write goes to when the body names
// none.
func defaultNamespace(c *gin.Context, asked string) (string, error) {
	p := principal(c)
	if asked == "" {
		if p.Namespace == auth.AllNamespaces {
			return domain.DefaultNamespace, nil
		}
		return p.Namespace, nil
	}
	if !p.Sees(asked) {
		return "", &Error{Code: CodePermissionDenied, Field: "namespace", Message: "this key is for namespace " + p.Namespace}
	}
	return asked, nil
}

// everyNamespace admits only keys of every namespace ("*"): what spans
// namespaces (the global log) is an operator's.
func everyNamespace(c *gin.Context) {
	if principal(c).Namespace != auth.AllNamespaces {
		_ = c.Error(&Error{Code: CodePermissionDenied, Message: "the global log needs a key of every namespace (*)"})
		c.Abort()
		return
	}
	c.Next()
}
