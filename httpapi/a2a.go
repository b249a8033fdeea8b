package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/gin-gonic/gin"

	a2aserver "github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
)

// The mount of Agent-Reach as an A2A agent (package a2a/server) on the
// API's router: each namespace's card at /a2a/{namespace}/.well-known/
// agent-card.json (the default namespace's also at /.well-known/
// agent-card.json), public; its JSON-RPC at /a2a/{namespace}, for a key
// that sees the namespace; and the ingress of A2A agents' pushes. Errors
// reach A2A callers by the API's one table of error kinds (rpcError).

func newA2AServer(deps Deps) *a2aserver.Server {
	var jobs a2aserver.Jobs
	if deps.A2AJobs != nil { // a handler test may leave the A2A face out
		jobs = deps.A2AJobs.A2A()
	}
	return a2aserver.New(a2aserver.Config{Jobs: jobs, Version: deps.Version, Error: rpcError,
		Unstorable: func(at string) string { return unstorableError(at).Message }})
}

func (s *Server) a2aNamespace(c *gin.Context) string {
	if ns := c.Param("namespace"); ns != "" {
		return ns
	}
	if ns := c.Query("namespace"); ns != "" {
		return ns
	}
	return domain.DefaultNamespace
}

// a2aCard serves a namespace's Agent Card.
func (s *Server) a2aCard(c *gin.Context) {
	ns := s.a2aNamespace(c)
	if !domain.ValidNamespace(ns) {
		_ = c.Error(NotFound("no namespace %q", ns))
		return
	}
	if err := s.a2a.ServeCard(c.Writer, c.Request, ns); err != nil {
		_ = c.Error(err)
	}
}

// a2aRPC serves A2A JSON-RPC for a namespace the key sees.
func (s *Server) a2aRPC(c *gin.Context) {
	ns := s.a2aNamespace(c)
	p := principal(c)
	if !domain.ValidNamespace(ns) || !p.Sees(ns) {
		_ = c.Error(NotFound("no namespace %q for this key", ns))
		return
	}
	if err := s.a2a.ServeRPC(c.Writer, c.Request, a2aserver.Caller{Principal: p, Namespace: ns, Metadata: s.meta(c, p.Actor())}); err != nil {
		_ = c.Error(err)
	}
}

// a2aPush is the ingress of push notifications from A2A agents:
// POST /a2a-push/{job_id}/{attempt} with the attempt's bearer token.
func (s *Server) a2aPush(c *gin.Context) {
	attempt, err := strconv.Atoi(c.Param("attempt"))
	if err != nil || attempt < 1 {
		_ = c.Error(Invalid("attempt", "must be a positive attempt number"))
		return
	}
	token := bearer(c)
	if token == "" {
		token = c.GetHeader("X-A2A-Notification-Token")
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		_ = c.Error(err)
		return
	}
	rec, err := s.deps.A2AJobs.ReportA2APush(c.Request.Context(), c.Param("job_id"), attempt, token, body)
	if errors.Is(err, a2aserver.ErrPushToken) {
		_ = c.Error(&Error{Code: CodeUnauthenticated, Message: "push token missing or invalid (Authorization: Bearer <token given with the message>)"})
		return
	}
	if err != nil {
		_ = c.Error(err)
		return
	}
	if rec == "" {
		rec = "unchanged"
	}
	c.JSON(http.StatusOK, gin.H{"recorded": rec})
}

// rpcError answers an error in A2A's terms: the A2A errors of their own
// (an unknown task, push configs), else its API error's JSON-RPC code
// (rpcCode) with its message; an internal error's text is for the log only.
func rpcError(err error) error {
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return a2a.ErrTaskNotFound
	case errors.Is(err, a2aserver.ErrPushConfig):
		return fmt.Errorf("%w: %w", a2a.ErrUnsupportedOperation, err)
	}
	e := toAPIError(err)
	if e.Code == CodeInternal {
		return a2a.ErrInternalError
	}
	return fmt.Errorf("%w: %s", rpcErrors[rpcCode(e.Code)], e.Message)
}

// rpcErrors are the a2a-go errors that a2asrv answers with each code.
var rpcErrors = map[int]error{
	-32600: a2a.ErrInvalidRequest,
	-32602: a2a.ErrInvalidParams,
	-32603: a2a.ErrInternalError,
	-32001: a2a.ErrTaskNotFound,
}
