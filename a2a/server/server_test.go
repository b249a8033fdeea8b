package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
)

var errNotFound = errors.New("no such job")

// jobs is a job service whose jobs end at once: SUCCESS with the payload
// echoed.
type jobs struct {
	mu     sync.Mutex
	jobs   map[string]*server.Job
	skills []server.Skill
	pushes map[string][]server.PushConfig
}

func newJobs(skills ...server.Skill) *jobs {
	return &jobs{jobs: map[string]*server.Job{}, skills: skills, pushes: map[string][]server.PushConfig{}}
}

func (f *jobs) Submit(_ context.Context, sub domain.Submitted, _ domain.Metadata, push *server.PushConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("0190f1c2-0000-7000-8000-%012d", len(f.jobs)+1)
	j := &server.Job{TraceID: "tr", UpdatedAt: time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC), LastEvent: domain.EventSuccess}
	j.JobID, j.Namespace, j.Capability, j.Status, j.Attempts, j.AgentID = id, sub.Namespace, sub.Capability, domain.StatusSuccess, 1, "echo"
	j.Result = json.RawMessage(`{"echo":` + string(sub.Payload) + `}`)
	f.jobs[id] = j
	if push != nil {
		j.CallbackURL = push.URL
		f.pushes[id] = append(f.pushes[id], *push)
	}
	return id, nil
}

func (f *jobs) Job(_ context.Context, id string) (*server.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.jobs[id]; ok {
		c := *j
		return &c, nil
	}
	return nil, errNotFound
}

func (f *jobs) Input(ctx context.Context, id string, _ json.RawMessage, _ domain.Metadata) (*server.Job, error) {
	if _, err := f.Job(ctx, id); err != nil {
		return nil, err
	}
	return nil, server.Refused(errors.New("job is SUCCESS, not awaiting input"))
}

func (f *jobs) Cancel(ctx context.Context, id, _ string, _ domain.Metadata) (*server.Job, error) {
	if _, err := f.Job(ctx, id); err != nil {
		return nil, err
	}
	return nil, server.Refused(errors.New("job is already SUCCESS"))
}

func (f *jobs) PushConfigs(_ context.Context, id string) ([]server.PushConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pushes[id], nil
}

func (f *jobs) SetPushConfig(_ context.Context, j *server.Job, p server.PushConfig) (server.PushConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes[j.JobID] = append(f.pushes[j.JobID], p)
	return p, nil
}

func (f *jobs) DeletePushConfig(_ context.Context, id, configID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.pushes[id] {
		if p.ID == configID {
			f.pushes[id] = append(f.pushes[id][:i], f.pushes[id][i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("job %s: %w", id, server.ErrNoPushConfig)
}

func (f *jobs) Skills(string) []server.Skill { return f.skills }

func (f *jobs) Offers(_, capability string) bool {
	for _, sk := range f.skills {
		if sk.Capability == capability {
			return true
		}
	}
	return false
}

func (f *jobs) Subscribe() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }
func (f *jobs) PublicURL() string                    { return "http://127.0.0.1:8080" }

func rpcError(err error) error {
	if errors.Is(err, errNotFound) {
		return sdk.ErrTaskNotFound
	}
	return sdk.ErrInternalError
}

// setup serves the namespace "default" to a caller with scopes.
func setup(t *testing.T, scopes ...string) (*jobs, func(body string) (*http.Response, string)) {
	t.Helper()
	js, post := setupVersioned(t, scopes...)
	return js, func(body string) (*http.Response, string) { t.Helper(); return post(body, "") }
}

// setupVersioned is setup whose calls name their A2A-Version ("": none).
func setupVersioned(t *testing.T, scopes ...string) (*jobs, func(body, version string) (*http.Response, string)) {
	t.Helper()
	js := newJobs(server.Skill{Capability: "t.echo", Agents: 1})
	s := server.New(server.Config{Jobs: js, Version: "1.2.3", Error: rpcError, Unstorable: func(at string) string { return at + " cannot be stored" }})
	p := &auth.Principal{KeyID: "k", Namespace: "default", Scopes: scopes}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.ServeRPC(w, r, server.Caller{Principal: p, Namespace: "default", Metadata: domain.Metadata{Actor: p.Actor()}}); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	return js, func(body, version string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}
}

func TestSendBothVersions(t *testing.T) {
	t.Parallel()
	_, post := setupVersioned(t, auth.ScopeJobsRead, "jobs:submit:t.*")
	rpc := func(body string) (*http.Response, string) { t.Helper(); return post(body, "") }

	resp, out := rpc(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"n":1}}]},
		"configuration":{"returnImmediately":true},"metadata":{"skill":"t.echo"}}}`)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, `{"id":1,"jsonrpc":"2.0","result":{"task":{"artifacts":[{"artifactId":"result","name":"result","parts":[{"data":{"echo":{"n":1}}}]}],`+
		`"contextId":"0190f1c2-0000-7000-8000-000000000001","id":"0190f1c2-0000-7000-8000-000000000001","metadata":{"agent_id":"echo","attempts":1,`+
		`"capability":"t.echo","reach_status":"SUCCESS","trace_id":"tr"},"status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-11-29T23:00:00Z"}}}}`, out)

	_, out = rpc(`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m2","role":"user","parts":[{"kind":"text","text":"hi"}]},
		"metadata":{"skill":"t.echo"}}}`)
	require.Equal(t, `{"jsonrpc":"2.0","id":2,"result":{"kind":"task","id":"0190f1c2-0000-7000-8000-000000000002","artifacts":[{"artifactId":"result",`+
		`"name":"result","parts":[{"kind":"data","data":{"echo":"hi"}}]}],"contextId":"0190f1c2-0000-7000-8000-000000000002","metadata":{"agent_id":"echo",`+
		`"attempts":1,"capability":"t.echo","reach_status":"SUCCESS","trace_id":"tr"},"status":{"state":"completed","timestamp":"2026-11-29T23:00:00Z"}}}`+"\n", out,
		"a v0.3 caller gets a2asrv's answer as it is")

	_, out = rpc(`{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"0190f1c2-0000-7000-8000-000000000009"}}`)
	require.Contains(t, out, `"code":-32001`)
	_, out = rpc(`{"jsonrpc":"2.0","id":4,"method":"CancelTask","params":{"id":"0190f1c2-0000-7000-8000-000000000001"}}`)
	require.Contains(t, out, `"code":-32002`, "a task that ended cannot be cancelled")
	_, out = rpc(`{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":{"message":{"messageId":"m5","role":"ROLE_USER","taskId":"0190f1c2-0000-7000-8000-000000000001",
		"parts":[{"data":{}}]}}}`)
	require.Contains(t, out, `"code":-32004`, "a message to a task that ended: A2A's UnsupportedOperationError")

	// The version is the A2A-Version header's, whatever the method is called.
	_, out = post(`{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"id":"0190f1c2-0000-7000-8000-000000000001"}}`, "1.0")
	require.Contains(t, out, `"state":"TASK_STATE_COMPLETED"`)
	_, out = post(`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"0190f1c2-0000-7000-8000-000000000001"}}`, "0.3")
	require.Contains(t, out, `"state":"completed"`)
	_, out = post(`{"jsonrpc":"2.0","id":8,"method":"GetTask","params":{"id":"0190f1c2-0000-7000-8000-000000000001"}}`, "2.0")
	require.Equal(t, `{"error":{"code":-32009,"message":"version not supported: A2A-Version not supported: \"2.0\" (this agent speaks 1.0 and 0.3)",`+
		`"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","reason":"VERSION_NOT_SUPPORTED"}]},"id":8,"jsonrpc":"2.0"}`, out)

	// A skill no agent offers is refused at once, naming what is offered.
	_, out = rpc(`{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"m9","role":"ROLE_USER","parts":[{"data":{}}]},
		"metadata":{"skill":"t.nobody"}}}`)
	require.Contains(t, out, `"code":-32602`)
	require.Contains(t, out, `"message":"invalid params: no agent in namespace default offers the skill \"t.nobody\" (it offers: t.echo)"`)
}

func TestScopesAndRefusals(t *testing.T) {
	t.Parallel()
	_, rpc := setup(t, auth.ScopeJobsRead)
	_, out := rpc(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{}}]}}}`)
	require.Contains(t, out, `"code":-32600`)
	require.Contains(t, out, "permission denied: this key lacks the scope jobs:submit:t.echo", "the lone skill is the one meant")

	resp, out := rpc(`{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"x"},"extra":true}`)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, `{"error":{"code":-32600,"message":"invalid request: unknown member \"extra\""},"id":9,"jsonrpc":"2.0"}`, out)
	_, out = rpc(`{"jsonrpc":"2.0","id":10,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m\u0000","parts":[]}}}`)
	require.Equal(t, `{"error":{"code":-32602,"message":"invalid params: params.message.messageId cannot be stored"},"id":10,"jsonrpc":"2.0"}`, out)
	_, out = rpc(`{"jsonrpc":"2.0","id":11,"method":"SendMessage","params":{"message":{"messageId":"m","role":5}}}`)
	require.Contains(t, out, `"code":-32700`)
	require.Contains(t, out, `"id":11`)
}

func TestPushConfigs(t *testing.T) {
	t.Parallel()
	js, rpc := setup(t, "jobs:submit:*")
	const task = "0190f1c2-0000-7000-8000-000000000001"
	_, out := rpc(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{}}]},
		"configuration":{"returnImmediately":true,"taskPushNotificationConfig":{"id":"cfg","url":"http://127.0.0.1:9/cb","token":"tok",
		"authentication":{"scheme":"Bearer","credentials":"secret"}}}}}`)
	require.Contains(t, out, `"task"`)
	require.Equal(t, []server.PushConfig{{ID: "cfg", URL: "http://127.0.0.1:9/cb", Token: "tok", Scheme: "Bearer", Credentials: "secret",
		Version: server.VersionV1}}, js.pushes[task], "a config given with a v1.0 message is a v1.0 config")

	// v1.0: flat configs, {taskId, id} to name one.
	_, out = rpc(`{"jsonrpc":"2.0","id":2,"method":"GetTaskPushNotificationConfig","params":{"tenant":"default","taskId":"` + task + `","id":"cfg"}}`)
	require.Equal(t, `{"id":2,"jsonrpc":"2.0","result":{"authentication":{"scheme":"Bearer"},"id":"cfg","taskId":"`+task+`","token":"tok",`+
		`"url":"http://127.0.0.1:9/cb"}}`, out, "credentials are not read back")
	_, out = rpc(`{"jsonrpc":"2.0","id":3,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + task + `","id":"second",
		"url":"http://127.0.0.1:9/two","token":"t2","authentication":{"scheme":"Basic","credentials":"dTpw"}}}`)
	require.Equal(t, `{"id":3,"jsonrpc":"2.0","result":{"authentication":{"scheme":"Basic"},"id":"second","taskId":"`+task+`","token":"t2",`+
		`"url":"http://127.0.0.1:9/two"}}`, out)
	require.Equal(t, server.PushConfig{ID: "second", URL: "http://127.0.0.1:9/two", Token: "t2", Scheme: "Basic", Credentials: "dTpw",
		Version: server.VersionV1}, js.pushes[task][1], "the flat url, token and credentials are read")
	_, out = rpc(`{"jsonrpc":"2.0","id":4,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"` + task + `"}}`)
	require.Equal(t, `{"id":4,"jsonrpc":"2.0","result":{"configs":[{"authentication":{"scheme":"Bearer"},"id":"cfg","taskId":"`+task+`","token":"tok",`+
		`"url":"http://127.0.0.1:9/cb"},{"authentication":{"scheme":"Basic"},"id":"second","taskId":"`+task+`","token":"t2","url":"http://127.0.0.1:9/two"}],`+
		`"nextPageToken":""}}`, out)
	_, out = rpc(`{"jsonrpc":"2.0","id":5,"method":"GetTaskPushNotificationConfig","params":{"taskId":"` + task + `","id":"nope"}}`)
	require.Contains(t, out, `"code":-32001`, "a config that does not exist is not found")
	for i := range 2 {
		_, out = rpc(`{"jsonrpc":"2.0","id":6,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"` + task + `","id":"cfg"}}`)
		require.Equal(t, `{"id":6,"jsonrpc":"2.0","result":{}}`, out, "deleting is idempotent (%d), and answers v1.0's Empty", i)
	}
	require.Len(t, js.pushes[task], 1)

	// v0.3: nested configs, {id, pushNotificationConfigId}.
	_, out = rpc(`{"jsonrpc":"2.0","id":7,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + task + `",
		"pushNotificationConfig":{"id":"third","url":"http://127.0.0.1:9/three"}}}`)
	require.Equal(t, `{"jsonrpc":"2.0","id":7,"result":{"pushNotificationConfig":{"id":"third","url":"http://127.0.0.1:9/three"},"taskId":"`+task+`"}}`+"\n", out)
	require.Equal(t, server.VersionV03, js.pushes[task][1].Version)
	_, out = rpc(`{"jsonrpc":"2.0","id":8,"method":"tasks/pushNotificationConfig/list","params":{"id":"` + task + `"}}`)
	require.Contains(t, out, `"result":[{"pushNotificationConfig":{"id":"second","authentication":{"schemes":["Basic"]},"token":"t2"`,
		"a v0.3 caller gets a2asrv's answer as it is")
	_, out = rpc(`{"jsonrpc":"2.0","id":9,"method":"tasks/pushNotificationConfig/delete","params":{"id":"` + task + `","pushNotificationConfigId":"third"}}`)
	require.Equal(t, `{"id":9,"jsonrpc":"2.0","result":null}`, out, "a method without a result answers null in v0.3")
}

// Streams answer in the version of the call: a2asrv's v0.3 events as they
// are, v1.0's StreamResponses otherwise; v1.0 refuses to subscribe to a
// task that ended, v0.3 streams it once.
func TestStreamsBothVersions(t *testing.T) {
	t.Parallel()
	_, post := setupVersioned(t, auth.ScopeJobsRead, "jobs:submit:*")
	_, out := post(`{"jsonrpc":"2.0","id":0,"method":"SendMessage","params":{"message":{"messageId":"s0","role":"ROLE_USER","parts":[{"text":"first"}]}}}`, "")
	require.Contains(t, out, `"TASK_STATE_COMPLETED"`)
	stream := func(body, version string) []string {
		resp, out := post(body, version)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		var data []string
		for line := range strings.SplitSeq(out, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, d)
			}
		}
		return data
	}
	got := stream(`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"s1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, "1.0")
	require.Len(t, got, 1, "the job ended at once: its task, and the stream ends")
	require.Contains(t, got[0], `"result":{"task":{"artifacts":[{"artifactId":"result","name":"result","parts":[{"data":{"echo":"hi"}}]}]`)
	require.Contains(t, got[0], `"state":"TASK_STATE_COMPLETED"`)
	got = stream(`{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{"id":"0190f1c2-0000-7000-8000-000000000001"}}`, "1.0")
	require.Len(t, got, 1)
	require.Contains(t, got[0], `"code":-32004`)
	require.Contains(t, got[0], `has ended (completed); read it with GetTask`)
	got = stream(`{"jsonrpc":"2.0","id":3,"method":"tasks/resubscribe","params":{"id":"0190f1c2-0000-7000-8000-000000000001"}}`, "")
	require.Len(t, got, 1)
	require.Contains(t, got[0], `"result":{"kind":"task"`)
	require.Contains(t, got[0], `"state":"completed"`)
}

func TestPushBody(t *testing.T) {
	t.Parallel()
	j := &server.Job{TraceID: "tr", UpdatedAt: time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)}
	j.JobID, j.Capability, j.Status, j.Attempts, j.Result = "0190f1c2-0000-7000-8000-000000000001", "t.echo", domain.StatusSuccess, 1, json.RawMessage(`"done"`)
	v03, ct, err := server.PushBody(j, server.VersionV03)
	require.NoError(t, err)
	require.Equal(t, "application/json", ct)
	require.Contains(t, string(v03), `"kind":"task"`)
	require.Contains(t, string(v03), `"state":"completed"`)
	v1, ct, err := server.PushBody(j, server.VersionV1)
	require.NoError(t, err)
	require.Equal(t, "application/a2a+json", ct)
	require.Equal(t, `{"task":{"artifacts":[{"artifactId":"result","name":"result","parts":[{"text":"done"}]}],`+
		`"contextId":"0190f1c2-0000-7000-8000-000000000001","id":"0190f1c2-0000-7000-8000-000000000001","metadata":{"attempts":1,`+
		`"capability":"t.echo","reach_status":"SUCCESS","trace_id":"tr"},"status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-11-29T23:00:00Z"}}}`, string(v1))
}

func TestCard(t *testing.T) {
	t.Parallel()
	js := newJobs(server.Skill{Capability: "calc.add", Aliases: []string{"math"}, Agents: 2})
	s := server.New(server.Config{Jobs: js, Version: "1.2.3"})
	w := httptest.NewRecorder()
	require.NoError(t, s.ServeCard(w, httptest.NewRequest(http.MethodGet, "/a2a/default/.well-known/agent-card.json", nil), "default"))
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	require.Equal(t, "public, max-age=60", w.Header().Get("Cache-Control"))
	require.Equal(t, `{"capabilities":{"extendedAgentCard":true,"pushNotifications":true,"stateTransitionHistory":true,"streaming":true},`+
		`"defaultInputModes":["application/json","text/plain"],"defaultOutputModes":["application/json","text/plain"],`+
		`"description":"Agent-Reach reaches every agent registered in namespace default: name a skill in the message's metadata.skill, `+
		`and the job is routed to the best healthy agent offering it, delivered durably, and its task answered here.",`+
		`"name":"Agent-Reach (default)","preferredTransport":"JSONRPC","protocolVersion":"0.3.0","security":[{"api_key":[]}],`+
		`"securitySchemes":{"api_key":{"description":"an Agent-Reach API key","scheme":"Bearer","type":"http"}},`+
		`"skills":[{"description":"calc.add, routed by Agent-Reach to 2 healthy agent(s) with retries, timeouts and dead-lettering",`+
		`"id":"calc.add","name":"calc.add","tags":["math"]}],"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0",`+
		`"tenant":"default","url":"http://127.0.0.1:8080/a2a/default"},{"protocolBinding":"JSONRPC","protocolVersion":"0.3",`+
		`"tenant":"default","url":"http://127.0.0.1:8080/a2a/default"}],"supportsAuthenticatedExtendedCard":true,`+
		`"url":"http://127.0.0.1:8080/a2a/default","version":"1.2.3"}`, w.Body.String())

	r := httptest.NewRequest(http.MethodGet, "/a2a/default/.well-known/agent-card.json", nil)
	r.Header.Set("If-None-Match", w.Header().Get("ETag"))
	w = httptest.NewRecorder()
	require.NoError(t, s.ServeCard(w, r, "default"))
	require.Equal(t, http.StatusNotModified, w.Code)
	require.Empty(t, w.Body.String())
}
