package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	// SetPushConfig adds or replaces a push config of job, running or not,
	// answering it with its id.
	SetPushConfig(ctx context.Context, job *Job, p PushConfig) (PushConfig, error)
	// DeletePushConfig removes a push config; an error marked
	// ErrNoPushConfig if the job has none of that id.
	DeletePushConfig(ctx context.Context, id, configID string) error
	// Skills lists the capabilities of a namespace's healthy agents, sorted.
	Skills(namespace string) []Skill
	// Offers reports whether any agent registered in the namespace (of any
	// health) offers the capability: a job for one no agent offers could
	// only wait and dead-letter.
	Offers(namespace, capability string) bool
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
	// Version is the protocol version the config was created in, whose
	// shape its notifications take: VersionV03 (the task) or VersionV1 (a
	// StreamResponse).
	Version string
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

// PushPath is where A2A agents push task updates of a job's attempt:
// PushPath + job_id + "/" + attempt, under the service's public URL.
const PushPath = "/a2a-push/"

// ErrPushToken: an agent's push carries no token, or not the attempt's.
var ErrPushToken = domain.NewError(domain.ErrUnauthenticated, "push token missing or invalid")

// ErrPushConfig: the job takes no push configs: it was submitted over
// REST, and its callback is its callback_url.
var ErrPushConfig = domain.NewError(domain.ErrInvalid, "push configs are for tasks created over A2A")

// ErrNoPushConfig marks the error Jobs answers for a push config a job
// does not have.
var ErrNoPushConfig = errors.New("no such push config")

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

// Protocol versions a request is served in: its A2A-Version, or, when it
// names none, the version of its method's name (v1.0's SendMessage, v0.3's
// message/send).
const (
	VersionV03 = "0.3"
	VersionV1  = "1.0"
)

type versionKey struct{}

// versionOf is the protocol version the request of ctx is served in.
func versionOf(ctx context.Context) string {
	if v, ok := ctx.Value(versionKey{}).(string); ok {
		return v
	}
	return VersionV03
}

// errVersion is an A2A-Version this server does not speak.
var errVersion = errors.New("A2A-Version not supported")

// requestVersion is the protocol version r asks for with method: its
// A2A-Version header (or query parameter), Major.Minor, else the
// version of the method's name. A version other than 0.3 and 1.x is
// errVersion.
func requestVersion(r *http.Request, method string) (string, error) {
	v := strings.TrimSpace(r.Header.Get("A2A-Version"))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get("A2A-Version"))
	}
	if v == "" {
		if _, v1 := a2a.MethodsV1[method]; v1 {
			return VersionV1, nil
		}
		return VersionV03, nil
	}
	major, minor, _ := strings.Cut(v, ".")
	minor, _, _ = strings.Cut(minor, ".")
	switch {
	case major == "1":
		return VersionV1, nil
	case major == "0" && minor == "3":
		return VersionV03, nil
	}
	return "", fmt.Errorf("%w: %q (this agent speaks 1.0 and 0.3)", errVersion, v)
}

// ServeRPC serves one JSON-RPC request to the caller's namespace, of either
// version: the version its A2A-Version names (or, without one, its
// method's), whose shapes it is answered in, streams included. It returns
// an error, having written nothing, only when the request's body cannot be
// read.
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
	version, err := requestVersion(r, head.Method)
	if refusal == nil && err != nil {
		version, refusal = VersionV1, refuse(head.ID, -32009, "version not supported: "+err.Error())
	}
	v03Body, err := requestV03(body)
	if refusal == nil && err != nil {
		refusal = refuse(head.ID, -32700, "parse error: "+err.Error())
	}
	if refusal != nil {
		if version == VersionV1 {
			refusal = errorV1(refusal)
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(refusal)
		return nil
	}
	ctx := context.WithValue(context.WithValue(r.Context(), callerKey{}, &c), versionKey{}, version)
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(v03Body))
	w.Header().Set("Content-Type", "application/json")
	v03 := a2a.MethodsV1[head.Method]
	if v03 == "" {
		v03 = head.Method
	}
	if v03 == "message/stream" || v03 == "tasks/resubscribe" {
		if version == VersionV1 {
			w = newStreamV1(w)
		}
		s.rpc.ServeHTTP(w, req)
		return nil
	}
	var buf bufferedResponse
	s.rpc.ServeHTTP(&buf, req)
	out := buf.body.Bytes()
	if len(bytes.TrimSpace(out)) == 0 {
		// a2asrv answers a method without a result (a deleted push
		// config) with nothing at all; JSON-RPC wants a result: null in
		// v0.3, v1.0's google.protobuf.Empty ({}).
		result := json.RawMessage("null")
		if version == VersionV1 {
			result = json.RawMessage("{}")
		}
		out, _ = json.Marshal(response{ID: head.ID, JSONRPC: json.RawMessage(`"2.0"`), Result: result})
	} else if version == VersionV1 {
		out = answerV1(v03, out) // a v1.0 caller gets v1.0 shapes
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
