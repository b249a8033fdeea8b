package httpapi

import (
	"context"
	"encoding/json"
	"time"

	a2aserver "github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/jobstore"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/webhook"
)

// What the handlers need of the services behind them, a small interface
// a face. cmd fills the jobs faces with its jobs.Service and the agent
// faces with its registry.Registry; a handler test may fill one face
// with a fake.

// Jobs is the jobs face: submit, read, list, cancel, replay, and the
// input and results that reach a job.
type Jobs interface {
	Submit(ctx context.Context, sub domain.Submitted, md domain.Metadata) (domain.SubmitResult, error)
	// SubmitWatching is Submit, handing watch the new job's id before it
	// commits (a submit with wait_ms watches it from there).
	SubmitWatching(ctx context.Context, sub domain.Submitted, md domain.Metadata, watch func(jobID string)) (domain.SubmitResult, error)
	Load(ctx context.Context, q eventstore.Querier, id string) (*jobstore.Loaded, error)
	List(ctx context.Context, f jobstore.ListFilter) ([]jobstore.Summary, error)
	Cancel(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error)
	Replay(ctx context.Context, id string, md domain.Metadata) (domain.SubmitResult, error)
	ProvideInput(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*jobstore.Loaded, error)
	ReportResultAndClaim(ctx context.Context, id, token string, rep domain.ResultReport, md domain.Metadata) (domain.Recorded, *jobstore.Loaded,
		[]webhook.Envelope, error)
	ReportProgress(ctx context.Context, id, token string, attempt int, extend time.Duration, progress json.RawMessage,
		md domain.Metadata) (*jobstore.Loaded, error)
}

// Retention is how long finished jobs' history is kept
// (retention.Service).
type Retention interface {
	PolicyOf(ctx context.Context, namespace string) (domain.RetentionPolicy, error)
	SetPolicy(ctx context.Context, namespace string, own time.Duration, md domain.Metadata) (domain.RetentionPolicy, error)
}

// Approvals is the approval face: a namespace's policy, and an
// approver's answer.
type Approvals interface {
	ApprovalPolicy(ctx context.Context, namespace string) (own, configured []string, err error)
	SetApprovalPolicy(ctx context.Context, namespace string, patterns []string, md domain.Metadata) error
	Approve(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error)
	Reject(ctx context.Context, id, reason string, md domain.Metadata) (*jobstore.Loaded, error)
}

// Callbacks is the face of the secrets that sign a namespace's callbacks.
type Callbacks interface {
	CallbackSecrets(ctx context.Context, namespace string) ([]string, error)
	RotateCallbackSecret(ctx context.Context, namespace string, md domain.Metadata) (string, time.Time, error)
}

// Inbox is the pull agents' face: claims, releases, and what was
// cancelled of what they hold.
type Inbox interface {
	Claim(ctx context.Context, a *registry.Agent, max int, wait time.Duration) ([]webhook.Envelope, error)
	Release(ctx context.Context, a *registry.Agent, held []domain.HeldAttempt, errText string) ([]domain.HeldAttempt, error)
	CancelledOf(ctx context.Context, k domain.AgentKey, since time.Time) ([]domain.HeldAttempt, error)
	InboxDepths(ctx context.Context) (map[domain.AgentKey]int, error)
}

// A2AJobs is the A2A face: the job service as the A2A server sees it,
// and A2A agents' pushes.
type A2AJobs interface {
	A2A() a2aserver.Jobs
	ReportA2APush(ctx context.Context, id string, attempt int, token string, body []byte) (domain.Recorded, error)
}

// Agents is the agents face: registration, an agent's own calls, and
// the operators' reads and changes.
type Agents interface {
	Register(ctx context.Context, reg domain.AgentRegistration, md domain.Metadata) (*registry.Agent, string, error)
	RegisterCard(ctx context.Context, cardURL string, reg domain.AgentRegistration, md domain.Metadata) (*registry.Agent, string, error)
	RegisterMCP(ctx context.Context, reg domain.AgentRegistration, headers map[string]string, md domain.Metadata) (*registry.Agent, string, error)
	MCPServers(ctx context.Context, ns string) ([]registry.MCPServer, error)
	Update(ctx context.Context, k domain.AgentKey, p domain.AgentPatch, md domain.Metadata) (*registry.Agent, error)
	Deregister(ctx context.Context, k domain.AgentKey, md domain.Metadata) error
	HeartbeatReport(ctx context.Context, id, token string, report domain.HealthReport, agentCtx map[string]any, md domain.Metadata) (*registry.Agent, error)
	Offline(ctx context.Context, id, token, reason string, md domain.Metadata) (*registry.Agent, error)
	RotateToken(ctx context.Context, k domain.AgentKey, presented string, md domain.Metadata) (string, time.Time, error)
	Operate(ctx context.Context, k domain.AgentKey, sig domain.AgentSignal, reason string, md domain.Metadata) (*registry.Agent, error)
	Find(ctx context.Context, ns, id string) (*registry.Agent, error)
	List(ctx context.Context, f registry.ListFilter) ([]*registry.Agent, error)
	RecentActivity(ctx context.Context, k domain.AgentKey, window time.Duration) (registry.Recent, error)
	Snapshot() *registry.Snapshot
	// Authenticate, PullAgent and KnownToken check an agent's token.
	Authenticate(ctx context.Context, id, token string) (*registry.Agent, error)
	PullAgent(ctx context.Context, id, token string) (*registry.Agent, error)
	KnownToken(token string) bool
	// Claimed records a pull agent's claim as its sign of life.
	Claimed(ctx context.Context, a *registry.Agent, md domain.Metadata) (*registry.Agent, error)
}

// Routing is the routing face: direct lookup and its reports, a
// namespace's routing policy, and self-preservation.
type Routing interface {
	Lookup(ctx context.Context, keyID string, req domain.RouteRequest, limit int) ([]registry.Candidate, error)
	Report(ctx context.Context, keyID, ns string, reports []domain.DirectReport, md domain.Metadata) error
	RoutingPolicy(ctx context.Context, ns string) (domain.RoutingPolicy, error)
	SetRoutingPolicy(ctx context.Context, ns string, p domain.RoutingPolicy, md domain.Metadata) (domain.RoutingPolicy, error)
	OpenPreservation(ctx context.Context, ns string) (*registry.Preservation, error)
}
