package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
)

// Jobs is what the server needs of the job service (jobs.Service.A2A).
// Errors are the service's own, of its error kinds; Config.Error turns them
// into A2A's.
type Jobs interface {
	// Submit submits the job a message asks for, with push, if any, as its
	// callback, written in the job's SUBMITTED transaction. It answers the
	// job's id (the earlier job's, for a repeated message id).
	Submit(ctx context.Context, sub domain.Submitted, md domain.Metadata, push *PushConfig) (string, error)
	// Job loads a job.
	Job(ctx context.Context, id string) (*Job, error)
	// Input sends the caller's input to the agent whose task awaits it;
	// an error marked Refused if the job awaits none.
	Input(ctx context.Context, id string, payload json.RawMessage, md domain.Metadata) (*Job, error)
	// Cancel cancels a job; an error marked Refused if it has ended.
	Cancel(ctx context.Context, id, reason string, md domain.Metadata) (*Job, error)
	// PushConfigs lists a job's push configs, oldest first.
	PushConfigs(ctx context.Context, id string) ([]PushConfig, error)
	// SetPushConfig adds or replaces a push config of job (one submitted
	// with a push config), answering it with its id.
	SetPushConfig(ctx context.Context, job *Job, p PushConfig) (PushConfig, error)
	// DeletePushConfig removes a push config.
	DeletePushConfig(ctx context.Context, id, configID string) error
	// Skills lists the capabilities of a namespace's healthy agents, sorted.
	Skills(namespace string) []Skill
	// Subscribe wakes its channel after commits to the event log, until
	// stop is called.
	Subscribe() (wake <-chan struct{}, stop func())
	// PublicURL is the service's base URL as callers reach it.
	PublicURL() string
}

// Job is a job as the server shows it, as a task.
type Job struct {
	domain.Job
	TraceID   string
	UpdatedAt time.Time
	// LastEvent is the type of the job's latest event.
	LastEvent domain.EventType
}

// PushConfig is a caller's push-notification config of a job: where the
// task goes when the job ends, and the credentials to present.
type PushConfig struct {
	ID          string
	URL         string
	Token       string
	Scheme      string // "Bearer" or "Basic"; empty: no Authorization header
	Credentials string
}

// Skill is a capability a namespace offers, with its aliases and how many
// healthy agents offer it.
type Skill struct {
	Capability string
	Aliases    []string
	Agents     int
}

// ErrRefused marks the errors Jobs answers when the job's state refuses
// the request: input for a job that awaits none, cancelling one that ended.
var ErrRefused = errors.New("refused by the job's state")

// Refused marks err as ErrRefused; its text stays err's.
func Refused(err error) error { return refused{err} }

type refused struct{ error }

func (r refused) Unwrap() []error { return []error{r.error, ErrRefused} }

// Config is what a Server serves.
type Config struct {
	Jobs Jobs
	// Version is the card's version: Agent-Reach's.
	Version string
	// Error turns an error of Jobs into the a2a-go error a2asrv answers
	// with (the API's one table of error kinds and their codes).
	Error func(error) error
	// Unstorable is the message refusing a request whose text at path at
	// PostgreSQL cannot store (the REST API's words for it).
	Unstorable func(at string) string
}

// Server serves the A2A face of every namespace.
type Server struct {
	cfg Config
	rpc http.Handler
}

// New returns a Server.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg}
	s.rpc = a2asrv.NewJSONRPCHandler(&handler{s: s})
	return s
}

// Caller is who calls a namespace's JSON-RPC endpoint, as the mount
// authenticated them: a key that sees the namespace.
type Caller struct {
	Principal *auth.Principal
	Namespace string
	// Metadata is that of the events the call causes: its trace and actor.
	Metadata domain.Metadata
}

type callerKey struct{}

func callerOf(ctx context.Context) *Caller { return ctx.Value(callerKey{}).(*Caller) }

// ServeRPC serves one JSON-RPC request to the caller's namespace, of either
// version. It returns an error, having written nothing, only when the
// request's body cannot be read.
func (s *Server) ServeRPC(w http.ResponseWriter, r *http.Request, c Caller) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &head)
	refusal := s.check(body)
	v03Body, err := requestV03(body)
	if refusal == nil && err != nil {
		refusal = refuse(head.ID, -32700, "parse error: "+err.Error())
	}
	if refusal != nil {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(refusal)
		return nil
	}
	req := r.Clone(context.WithValue(r.Context(), callerKey{}, &c))
	req.Body = io.NopCloser(bytes.NewReader(v03Body))
	w.Header().Set("Content-Type", "application/json")
	v03 := a2a.MethodsV1[head.Method]
	if v03 == "" {
		v03 = head.Method
	}
	if v03 == "message/stream" || v03 == "tasks/resubscribe" {
		s.rpc.ServeHTTP(w, req)
		return nil
	}
	var buf bufferedResponse
	s.rpc.ServeHTTP(&buf, req)
	out := buf.body.Bytes()
	switch {
	case len(bytes.TrimSpace(out)) == 0:
		// a2asrv answers a method without a result (a deleted push
		// config) with nothing at all; JSON-RPC wants a null result.
		out, _ = json.Marshal(response{ID: head.ID, JSONRPC: json.RawMessage(`"2.0"`), Result: json.RawMessage("null")})
	case v03 != head.Method:
		out = answerV1(head.Method, out) // a v1.0 caller gets v1.0 shapes
	}
	w.WriteHeader(buf.status())
	_, _ = w.Write(out)
	return nil
}

// bufferedResponse keeps a handler's answer to translate it.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedResponse) WriteHeader(code int) { b.code = code }

func (b *bufferedResponse) status() int {
	if b.code == 0 {
		return http.StatusOK
	}
	return b.code
}
