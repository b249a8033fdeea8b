package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
	"github.com/stretchr/testify/require"
)

// a2aCall posts one JSON-RPC request to the namespace's A2A face, with an
// A2A-Version when version is not empty, and answers the decoded answer.
func a2aCall(t *testing.T, base, ns, version, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/a2a/"+ns, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// pushRecorder is a webhook that keeps every push, by path, and answers
// each path's first push with first (then 200).
type pushRecorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   map[string][]recordedPush
	first map[string]int
}

type recordedPush struct {
	contentType string
	body        map[string]any
}

func newPushRecorder(t *testing.T, first map[string]int) *pushRecorder {
	t.Helper()
	p := &pushRecorder{got: map[string][]recordedPush{}, first: first}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		p.mu.Lock()
		p.got[r.URL.Path] = append(p.got[r.URL.Path], recordedPush{contentType: r.Header.Get("Content-Type"), body: body})
		n := len(p.got[r.URL.Path])
		p.mu.Unlock()
		if code := p.first[r.URL.Path]; code != 0 && n == 1 {
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pushRecorder) pushes(path string) []recordedPush {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recordedPush(nil), p.got[path]...)
}

// TestA2APushConfigsOnTheirOwn: the push configs of one task, given with
// the message, created while it runs in v1.0's flat shape, and set in
// v0.3's, are each sent the finished task in the shape of the version they
// were created in; one whose first push fails is retried alone, and none
// that acknowledged is sent it again. A task without configs settles its
// callback with nothing to send.
func TestA2APushConfigsOnTheirOwn(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	release := make(chan struct{})
	agent := newSDKAgent(t, "Holder", []a2a.AgentSkill{{ID: "t.hold"}}, true, completesAfter("holder", release))
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q}`, agent.srv.URL))
	waitState(t, base, "holder", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "t.hold", "holder")
	hooks := newPushRecorder(t, map[string]int{"/flaky": http.StatusServiceUnavailable})

	sent := a2aCall(t, base, "default", "1.0", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-push",
		"role":"ROLE_USER","parts":[{"data":{"a":1,"b":2}}]},"metadata":{"skill":"t.hold"},"configuration":{"returnImmediately":true,
		"taskPushNotificationConfig":{"id":"flaky","url":%q}}}}`, hooks.srv.URL+"/flaky"))
	id := sent["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second)
	created := a2aCall(t, base, "default", "1.0", fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"CreateTaskPushNotificationConfig",
		"params":{"taskId":%q,"id":"steady","url":%q,"token":"tok"}}`, id, hooks.srv.URL+"/steady"))
	require.Equal(t, map[string]any{"id": "steady", "taskId": id, "token": "tok", "url": hooks.srv.URL + "/steady"}, created["result"],
		"a v1.0 config, flat, on a running task")
	set := a2aCall(t, base, "default", "", fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tasks/pushNotificationConfig/set",
		"params":{"taskId":%q,"pushNotificationConfig":{"id":"old","url":%q}}}`, id, hooks.srv.URL+"/old"))
	require.Nil(t, set["error"], "%v", set)
	empty := a2aCall(t, base, "default", "1.0", fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"CreateTaskPushNotificationConfig",
		"params":{"taskId":%q,"id":"nowhere","url":""}}`, id))
	require.Equal(t, -32602.0, empty["error"].(map[string]any)["code"], "a config without a URL is refused: %v", empty)

	close(release)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Callback != nil && j.Callback.Acknowledged }, 20*time.Second)
	require.Len(t, hooks.pushes("/flaky"), 2, "the failing config is tried again")
	require.Len(t, hooks.pushes("/steady"), 1, "a config that acknowledged is not sent to again")
	require.Len(t, hooks.pushes("/old"), 1)
	for _, p := range append(hooks.pushes("/flaky"), hooks.pushes("/steady")...) {
		require.Equal(t, "application/a2a+json", p.contentType)
		task := p.body["task"].(map[string]any) // a StreamResponse
		require.Equal(t, "TASK_STATE_COMPLETED", task["status"].(map[string]any)["state"])
		require.NotContains(t, task, "kind")
	}
	old := hooks.pushes("/old")[0]
	require.Equal(t, "application/json", old.contentType)
	require.Equal(t, "task", old.body["kind"], "a v0.3 config gets the v0.3 task itself")
	require.Equal(t, "completed", old.body["status"].(map[string]any)["state"])

	db := openDB(t, dsn)
	rows, err := db.Query(context.Background(), `SELECT config_id, protocol_version, attempts, delivered_at IS NOT NULL
		FROM a2a_push_configs WHERE job_id = $1 ORDER BY config_id`, id)
	require.NoError(t, err)
	var configs []string
	for rows.Next() {
		var cfg, version string
		var attempts int
		var delivered bool
		require.NoError(t, rows.Scan(&cfg, &version, &attempts, &delivered))
		configs = append(configs, fmt.Sprintf("%s %s %d %v", cfg, version, attempts, delivered))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"flaky 1.0 2 true", "old 0.3 1 true", "steady 1.0 1 true"}, configs)
	type pushOutcome struct {
		ConfigID   string `json:"config_id"`
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
		Delivered  bool   `json:"delivered"`
	}
	type callback struct {
		Type    string
		Pending int           `json:"pending"`
		Pushes  []pushOutcome `json:"pushes"`
	}
	var callbacks []callback
	for _, e := range jobEventsFull(t, base, id) {
		if strings.HasPrefix(e.Type, "CALLBACK_") {
			c := callback{Type: e.Type}
			require.NoError(t, json.Unmarshal(e.Data, &c))
			callbacks = append(callbacks, c)
		}
	}
	require.Equal(t, []callback{
		{Type: "CALLBACK_FAILED", Pending: 1, Pushes: []pushOutcome{{ConfigID: "flaky", StatusCode: 503, Error: "answered 503"},
			{ConfigID: "steady", StatusCode: 200, Delivered: true}, {ConfigID: "old", StatusCode: 200, Delivered: true}}},
		{Type: "CALLBACK_DELIVERED", Pushes: []pushOutcome{{ConfigID: "flaky", StatusCode: 200, Delivered: true}}},
	}, callbacks, "the retry posts to the failing config alone")

	// A task without configs: its callback settles with nothing to send.
	bare := a2aCall(t, base, "default", "1.0", `{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":{"message":{"messageId":"m-bare",
		"role":"ROLE_USER","parts":[{"data":{"a":1,"b":1}}]},"metadata":{"skill":"t.hold"}}}`)
	bareID := bare["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	j := waitJob(t, base, bareID, func(j jobJSON) bool { return j.Callback != nil && j.Callback.Acknowledged }, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status)
	evs := jobEventsFull(t, base, bareID)
	require.Equal(t, "CALLBACK_DELIVERED", evs[len(evs)-1].Type)
	require.JSONEq(t, `{"attempt":1,"pushes":[]}`, string(evs[len(evs)-1].Data))
}

// restartableAgent is an A2A agent built with the Go A2A SDK whose process
// can be "restarted": its request handler, and with it every task it
// knew, is replaced by a fresh one at the same address.
type restartableAgent struct {
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	build   func() http.Handler
}

func newRestartableAgent(t *testing.T, name, skill string, withPush bool, execute func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error) *restartableAgent {
	t.Helper()
	a := &restartableAgent{}
	exec := &sdkAgent{messages: make(chan *a2a.Message, 100), cancels: make(chan a2a.TaskID, 100), executeFn: execute}
	a.build = func() http.Handler {
		var opts []a2asrv.RequestHandlerOption
		if withPush {
			opts = append(opts, a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(nil)))
		}
		return a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(sdkExecutor{exec}, opts...))
	}
	h := a.build()
	a.handler.Store(&h)
	mux := http.NewServeMux()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*a.handler.Load()).ServeHTTP(w, r) }))
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(a2a.AgentCard{Name: name, Description: "restarts", URL: a.srv.URL + "/", Version: "1.0.0",
			ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC, Capabilities: a2a.AgentCapabilities{PushNotifications: withPush},
			DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"application/json"}, Skills: []a2a.AgentSkill{{ID: skill}}})
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// restart forgets every task, as a process killed and started again does.
func (a *restartableAgent) restart() {
	h := a.build()
	a.handler.Store(&h)
}

// TestA2ALostTaskIsRetriedAtOnce: an agent that restarted and lost the
// task of a job's attempt answers GetTask with TaskNotFound; the attempt
// fails at once (a2a_task_lost) and the job goes to the agent again, long
// before its deadline, whether the agent pushes (its task is watched) or
// is polled.
func TestA2ALostTaskIsRetriedAtOnce(t *testing.T) {
	t.Parallel()
	for _, withPush := range []bool{true, false} {
		t.Run(fmt.Sprintf("push=%v", withPush), func(t *testing.T) {
			t.Parallel()
			svc, _ := service(t)
			base := svc.m.URL()
			var calls atomic.Int32
			agent := newRestartableAgent(t, "Forgetful", "t.forget", withPush, func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
				if calls.Add(1) == 1 {
					if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
						return err
					}
					<-ctx.Done() // the first task is lost with the process
					return ctx.Err()
				}
				return completes("forgetful")(ctx, rc, q)
			})
			registerCard(t, base, fmt.Sprintf(`{"card_url":%q}`, agent.srv.URL))
			waitState(t, base, "forgetful", "HEALTHY", 20*time.Second)
			waitChosen(t, base, "t.forget", "forgetful")

			id := submitOK(t, base, `{"capability":"t.forget","payload":{"a":2,"b":2},"timeout_ms":120000}`)
			waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second)
			agent.restart()
			j := waitTerminal(t, base, id, 30*time.Second) // the deadline is two minutes away
			require.Equal(t, "SUCCESS", j.Status, j.Error)
			require.JSONEq(t, `{"sum":4,"by":"forgetful"}`, string(j.Result))
			evs := jobEventsFull(t, base, id)
			var got []string
			for _, e := range evs {
				got = append(got, e.Type)
			}
			require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "SUCCESS"}, got)
			require.Contains(t, string(evs[3].Data), `"reason":"a2a_task_lost"`)
			require.Equal(t, "a2a:poll", evs[3].Metadata.Actor)
		})
	}
}
