package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/a2asrv/push"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// sdkAgent is a real A2A agent built with the Go A2A SDK (a2asrv): its
// JSON-RPC endpoint at /, its card, with an ETag and a max-age, at the
// well-known path. The card can be changed while it runs.
type sdkAgent struct {
	srv       *httptest.Server
	mu        sync.Mutex
	card      a2a.AgentCard
	revalids  atomic.Int32 // card fetches answered 304
	messages  chan *a2a.Message
	cancels   chan a2a.TaskID
	executeFn func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error
}

type sdkExecutor struct{ a *sdkAgent }

func (e sdkExecutor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.a.messages <- rc.Message
	return e.a.executeFn(ctx, rc, q)
}

func (e sdkExecutor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.a.cancels <- rc.TaskID
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// newSDKAgent starts an A2A agent offering skills; withPush gives it push
// notifications (else Agent-Reach must poll it).
func newSDKAgent(t *testing.T, name string, skills []a2a.AgentSkill, withPush bool,
	execute func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error) *sdkAgent {
	t.Helper()
	a := &sdkAgent{messages: make(chan *a2a.Message, 100), cancels: make(chan a2a.TaskID, 100), executeFn: execute}
	var opts []a2asrv.RequestHandlerOption
	if withPush {
		opts = append(opts, a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(nil)))
	}
	mux := http.NewServeMux()
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(sdkExecutor{a}, opts...)))
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		body, _ := json.Marshal(a.card)
		a.mu.Unlock()
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		w.Header().Set("Cache-Control", "max-age=1")
		if r.Header.Get("If-None-Match") == etag {
			a.revalids.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	a.card = a2a.AgentCard{Name: name, Description: "a test agent", URL: a.srv.URL + "/", Version: "1.0.0",
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:      a2a.AgentCapabilities{PushNotifications: withPush},
		DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"application/json"}, Skills: skills}
	return a
}

func (a *sdkAgent) setSkills(skills []a2a.AgentSkill) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.card.Skills = skills
}

// completes answers {"sum": a+b, "by": name}: working, an artifact, then
// completed, each pushed by the SDK when it has a push config.
func completes(name string) func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
		in := map[string]any{}
		if dp, ok := rc.Message.Parts[0].(a2a.DataPart); ok {
			in = dp.Data
		}
		a, _ := in["a"].(float64)
		b, _ := in["b"].(float64)
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.DataPart{Data: map[string]any{"sum": a + b, "by": name}})); err != nil {
			return err
		}
		done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
		done.Final = true
		return q.Write(ctx, done)
	}
}

// completesAfter is completes once release is closed; until then the task
// is working.
func completesAfter(name string, release <-chan struct{}) func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return completes(name)(ctx, rc, q)
	}
}

func rejects(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateRejected, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "not for me"}))
	ev.Final = true
	return q.Write(ctx, ev)
}

type fullEventJSON struct {
	StreamID   string          `json:"stream_id"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	RecordedAt time.Time       `json:"recorded_at"`
	Metadata   struct {
		Actor string `json:"actor"`
	} `json:"metadata"`
}

func jobEventsFull(t *testing.T, base, id string) []fullEventJSON {
	t.Helper()
	var out struct {
		Events []fullEventJSON `json:"events"`
	}
	getJSON(t, base+"/v1/jobs/"+id+"/events", http.StatusOK, &out)
	return out.Events
}

func registerCard(t *testing.T, base, body string) agentJSON {
	t.Helper()
	var reg agentJSON
	postJSON(t, base+"/v1/agents", body, http.StatusCreated, &reg)
	return reg
}

type cardAgentJSON struct {
	AgentID         string         `json:"agent_id"`
	Capabilities    []string       `json:"capabilities"`
	Aliases         []string       `json:"aliases"`
	Endpoint        string         `json:"endpoint"`
	Protocol        string         `json:"protocol"`
	Version         string         `json:"version"`
	Metadata        map[string]any `json:"metadata"`
	State           string         `json:"state"`
	RegisteredAt    time.Time      `json:"registered_at"`
	LastHeartbeatAt time.Time      `json:"last_heartbeat_at"`
}

func getCardAgent(t *testing.T, base, id string) cardAgentJSON {
	t.Helper()
	var a cardAgentJSON
	getJSON(t, base+"/v1/agents/"+id, http.StatusOK, &a)
	return a
}

// waitFor polls cond every 50 ms until it holds, failing once within has
// passed.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			require.True(t, cond(), "not within %s: %s", within, what)
			return
		}
	}
}

// TestA2ARegisterByCardAndDeliverByPush: an agent built with the Go A2A SDK
// is registered from its card; a job for one of its skills, submitted
// through the API, ends SUCCESS with the agent's result, which arrived by
// push notification. Its card is revalidated with its ETag (each answer
// renews the lease), and a changed card is picked up and recorded.
func TestA2ARegisterByCardAndDeliverByPush(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	release := make(chan struct{})
	// The agent finishes once the test saw the delivery recorded, so the result can only come by push.
	agent := newSDKAgent(t, "Calc Agent", []a2a.AgentSkill{{ID: "calc.add", Name: "add", Tags: []string{"math"}}}, true,
		completesAfter("calc", release))

	reg := registerCard(t, base, fmt.Sprintf(`{"card_url":%q,"ttl_seconds":6}`, agent.srv.URL))
	require.Equal(t, "calc-agent", reg.AgentID, "the id comes from the card's name")
	require.NotEmpty(t, reg.Token)
	a := getCardAgent(t, base, "calc-agent")
	require.Equal(t, "a2a", a.Protocol)
	require.Equal(t, []string{"calc.add"}, a.Capabilities)
	require.Equal(t, []string{"math"}, a.Aliases)
	require.Equal(t, agent.srv.URL+"/", a.Endpoint)
	require.Equal(t, "1.0.0", a.Version)
	require.Equal(t, true, a.Metadata["a2a"].(map[string]any)["push"])
	waitState(t, base, "calc-agent", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "calc.add", "calc-agent")

	id := submitOK(t, base, `{"capability":"calc.add","payload":{"a":2,"b":3}}`)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second)
	close(release)
	j := waitTerminal(t, base, id, 15*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.Equal(t, "calc-agent", j.AgentID)
	require.JSONEq(t, `{"sum":5,"by":"calc"}`, string(j.Result))
	evs := jobEventsFull(t, base, id)
	var got []string
	for _, e := range evs {
		got = append(got, e.Type)
	}
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "SUCCESS"}, got)
	require.Equal(t, "a2a:push:calc-agent", evs[3].Metadata.Actor, "the result came by push")
	msg := <-agent.messages
	require.Equal(t, id, msg.ID, "the message id is the job id, so the agent can drop a repeat")
	require.Equal(t, "calc.add", msg.Metadata["skill"])

	// The card is revalidated with its ETag, and each answer renews the lease.
	waitFor(t, 15*time.Second, "a 304 revalidation and a lease renewed by it", func() bool {
		a := getCardAgent(t, base, "calc-agent")
		return agent.revalids.Load() > 0 && a.LastHeartbeatAt.After(a.RegisteredAt.Add(2*time.Second)) && a.State == "HEALTHY"
	})

	// A changed card is picked up on the next refresh and recorded.
	agent.setSkills([]a2a.AgentSkill{{ID: "calc.add", Tags: []string{"math"}}, {ID: "calc.mul", Tags: []string{"math"}}})
	waitFor(t, 15*time.Second, "the new skill", func() bool {
		return len(getCardAgent(t, base, "calc-agent").Capabilities) == 2
	})
	var updates []fullEventJSON
	// The global log shows events once every older transaction in the
	// cluster has ended (its visibility horizon): wait for it.
	waitFor(t, 15*time.Second, "AGENT_CARD_UPDATED in the global log", func() bool {
		var log struct {
			Events []fullEventJSON `json:"events"`
		}
		getJSON(t, base+"/v1/events?limit=1000", http.StatusOK, &log)
		updates = nil
		for _, e := range log.Events {
			if e.StreamID == "agent:default/calc-agent" && e.Type == "AGENT_CARD_UPDATED" {
				updates = append(updates, e)
			}
		}
		return len(updates) > 0
	})
	require.Len(t, updates, 1)
	require.Contains(t, string(updates[0].Data), `"calc.mul"`)
}

// TestA2ARejectedIsRerouted: an A2A agent that answers REJECTED does not
// get the job again; it goes at once to another agent with the capability.
func TestA2ARejectedIsRerouted(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	skill := []a2a.AgentSkill{{ID: "t.pick"}}
	rejecter := newSDKAgent(t, "Rejecter", skill, true, rejects)
	taker := newSDKAgent(t, "Taker", skill, true, completes("taker"))
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q,"agent_id":"rejecter","weight":100}`, rejecter.srv.URL))
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q,"agent_id":"taker","weight":1}`, taker.srv.URL))
	waitState(t, base, "rejecter", "HEALTHY", 20*time.Second)
	waitState(t, base, "taker", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "t.pick", "rejecter")

	id := submitOK(t, base, `{"capability":"t.pick","payload":{"a":1,"b":1},"max_attempts":3,"backoff_base_ms":600000}`)
	j := waitTerminal(t, base, id, 15*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.Equal(t, "taker", j.AgentID)
	require.JSONEq(t, `{"sum":2,"by":"taker"}`, string(j.Result))
	evs := jobEvents(t, base, id)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "ATTEMPT_FAILED", "ROUTED", "DELIVERED", "SUCCESS"}, types(evs))
	require.Equal(t, []string{"rejecter", "taker"}, routedTo(t, evs))
	require.Contains(t, string(evs[3].Data), `"reason":"rejected"`)
	require.Len(t, rejecter.messages, 1, "a rejecting agent is not asked again")
}

// TestA2APollsAgentWithoutPush: an agent whose card offers no push
// notifications is polled with GetTask until its task ends.
func TestA2APollsAgentWithoutPush(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	release := make(chan struct{})
	agent := newSDKAgent(t, "Slow", []a2a.AgentSkill{{ID: "t.slow"}}, false, completesAfter("slow", release))
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q}`, agent.srv.URL))
	waitState(t, base, "slow", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "t.slow", "slow")

	id := submitOK(t, base, `{"capability":"t.slow","payload":{"a":4,"b":5}}`)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second)
	close(release)
	j := waitTerminal(t, base, id, 20*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.JSONEq(t, `{"sum":9,"by":"slow"}`, string(j.Result))
	evs := jobEventsFull(t, base, id)
	require.Equal(t, "SUCCESS", evs[len(evs)-1].Type)
	require.Equal(t, "a2a:poll", evs[len(evs)-1].Metadata.Actor)
	require.Contains(t, string(evs[2].Data), `"remote_task_id"`)
}

// TestAgentReachAsA2AAgent: the Go A2A SDK's client, pointed at
// Agent-Reach's own card, sends a message and reads the task's result back
// with GetTask; the v1.0 method names work too, and a push config is the
// job's callback, delivered as an A2A task.
func TestAgentReachAsA2AAgent(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	newTestAgent(t, base, "echo", "t.echo", 50, answer("SUCCESS", ""))
	newTestAgent(t, base, "other", "t.other", 50, answer("SUCCESS", ""))
	ctx := context.Background()

	card, err := agentcard.DefaultResolver.Resolve(ctx, base+"/a2a/default")
	require.NoError(t, err)
	require.Equal(t, base+"/a2a/default", card.URL)
	var skills []string
	for _, s := range card.Skills {
		skills = append(skills, s.ID)
	}
	require.Equal(t, []string{"t.echo", "t.other"}, skills, "skills are the namespace's healthy capabilities")
	root, err := agentcard.DefaultResolver.Resolve(ctx, base)
	require.NoError(t, err)
	require.Equal(t, card.URL, root.URL, "the default namespace's card is also at the root")

	client, err := a2aclient.NewFromCard(ctx, card)
	require.NoError(t, err)
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"n": 1}}),
		Metadata: map[string]any{"skill": "t.echo"}})
	require.NoError(t, err)
	sent, ok := res.(*a2a.Task)
	require.True(t, ok, "%T", res)
	task, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: sent.ID})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Len(t, task.Artifacts, 1)
	data := task.Artifacts[0].Parts[0].(a2a.DataPart).Data
	require.Equal(t, string(sent.ID), data["job_id"], "the task id is the job id, and the result is the agent's")
	require.Equal(t, "SUCCESS", getJob(t, base, string(sent.ID)).Status)

	// No skill named, and the namespace offers two: a clear error.
	_, err = client.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})})
	require.ErrorIs(t, err, a2a.ErrInvalidParams)
	// An unknown task.
	_, err = client.GetTask(ctx, &a2a.TaskQueryParams{ID: "0190f1c2-0000-7000-8000-000000000000"})
	require.ErrorIs(t, err, a2a.ErrTaskNotFound)

	// v1.0 names and shapes, returning at once; then GetTask until done.
	rpc := func(body string) map[string]any {
		resp, err := http.Post(base+"/a2a/default", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Nil(t, out["error"], "%v", out)
		return out["result"].(map[string]any)
	}
	r := rpc(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-v1","role":"ROLE_USER",
		"parts":[{"data":{"n":2}}]},"configuration":{"returnImmediately":true},"metadata":{"skill":"t.echo"}}}`)
	v1Task := r["task"].(map[string]any) // a SendMessageResponse
	jobID := v1Task["id"].(string)
	require.NotContains(t, v1Task, "kind")
	var done map[string]any
	waitFor(t, 10*time.Second, "the v1.0 task to complete", func() bool {
		done = rpc(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":%q}}`, jobID))
		return done["status"].(map[string]any)["state"] == "TASK_STATE_COMPLETED"
	})
	part := done["artifacts"].([]any)[0].(map[string]any)["parts"].([]any)[0].(map[string]any)
	require.Equal(t, jobID, part["data"].(map[string]any)["job_id"], "a v1.0 part: no kind")
	require.NotContains(t, part, "kind")
	again := rpc(`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m-v1","role":"ROLE_USER",
		"parts":[{"data":{"n":2}}]},"configuration":{"returnImmediately":true},"metadata":{"skill":"t.echo"}}}`)
	require.Equal(t, jobID, again["task"].(map[string]any)["id"], "the message id is the idempotency key")

	// A push config is the job's callback: the caller gets the task, with its credentials.
	type pushed struct {
		auth, token string
		task        a2a.Task
	}
	pushes := make(chan pushed, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var tk a2a.Task
		_ = json.Unmarshal(b, &tk)
		pushes <- pushed{auth: r.Header.Get("Authorization"), token: r.Header.Get("X-A2A-Notification-Token"), task: tk}
	}))
	t.Cleanup(receiver.Close)
	blocking := false
	res, err = client.SendMessage(ctx, &a2a.MessageSendParams{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"n": 3}}),
		Metadata: map[string]any{"skill": "t.echo"},
		Config: &a2a.MessageSendConfig{Blocking: &blocking, PushConfig: &a2a.PushConfig{URL: receiver.URL, Token: "tok-1",
			Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "secret-1"}}}})
	require.NoError(t, err)
	withPush := res.(*a2a.Task)
	select {
	case p := <-pushes:
		require.Equal(t, "Bearer secret-1", p.auth)
		require.Equal(t, "tok-1", p.token)
		require.Equal(t, withPush.ID, p.task.ID)
		require.Equal(t, a2a.TaskStateCompleted, p.task.Status.State)
	case <-time.After(15 * time.Second):
		t.Fatal("no push of the finished task")
	}
	list, err := client.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: withPush.ID})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, receiver.URL, list[0].Config.URL)
	waitJob(t, base, string(withPush.ID), func(j jobJSON) bool { return j.Callback != nil && j.Callback.Acknowledged }, 10*time.Second)

	// Streaming: the task at every change of its status, over SSE, until it ends.
	var states []a2a.TaskState
	var last *a2a.Task
	for ev, err := range client.SendStreamingMessage(ctx, &a2a.MessageSendParams{
		Message:  a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"n": 4}}),
		Metadata: map[string]any{"skill": "t.echo"}}) {
		require.NoError(t, err)
		tk, ok := ev.(*a2a.Task)
		require.True(t, ok, "%T", ev)
		states, last = append(states, tk.Status.State), tk
	}
	require.NotNil(t, last)
	require.Equal(t, a2a.TaskStateCompleted, last.Status.State, "%v", states)
	require.Equal(t, string(last.ID), last.Artifacts[0].Parts[0].(a2a.DataPart).Data["job_id"])
	var resubscribed []a2a.Event
	for ev, err := range client.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: last.ID}) {
		require.NoError(t, err)
		resubscribed = append(resubscribed, ev)
	}
	require.Len(t, resubscribed, 1, "a finished task streams once, as it ended")
	require.Equal(t, a2a.TaskStateCompleted, resubscribed[0].(*a2a.Task).Status.State)

	// Cancelling a finished task is refused with A2A's code.
	_, err = client.CancelTask(ctx, &a2a.TaskIDParams{ID: sent.ID})
	require.ErrorIs(t, err, a2a.ErrTaskNotCancelable)
}

// TestA2AInputRequiredStopsTheDeadline: an agent that needs input holds the
// job in AWAITING_INPUT with no deadline running; when it works again the
// job is RESUMED under a fresh deadline, and its result ends the job.
func TestA2AInputRequiredStopsTheDeadline(t *testing.T) {
	t.Parallel()
	svc, dsn := service(t)
	base := svc.m.URL()
	resume := make(chan struct{})
	agent := newSDKAgent(t, "Asker", []a2a.AgentSkill{{ID: "t.ask"}}, true, func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
		ask := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "which unit?"}))
		if err := q.Write(ctx, ask); err != nil {
			return err
		}
		select {
		case <-resume:
		case <-ctx.Done():
			return ctx.Err()
		}
		return completes("asker")(ctx, rc, q)
	})
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q}`, agent.srv.URL))
	waitState(t, base, "asker", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "t.ask", "asker")

	id := submitOK(t, base, `{"capability":"t.ask","payload":{"a":1,"b":2},"timeout_ms":2000}`)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "AWAITING_INPUT" }, 10*time.Second)
	db := openDB(t, dsn)
	var phase string
	var due time.Time
	require.NoError(t, db.QueryRow(context.Background(), `SELECT phase, due_at FROM job_timers WHERE job_id = $1`, id).Scan(&phase, &due))
	require.Equal(t, "input", phase, "no delivery deadline runs while the agent waits for input")
	require.True(t, due.After(time.Now().Add(30*time.Minute)), "the input timeout (1 h), not the job's 2 s: %s", due)
	evs := jobEventsFull(t, base, id)
	require.Contains(t, string(evs[len(evs)-1].Data), `"state":"input-required"`)
	require.Contains(t, string(evs[len(evs)-1].Data), `which unit?`)

	// Cancelling a job an A2A agent holds cancels its task there too.
	second := submitOK(t, base, `{"capability":"t.ask","payload":{"a":0,"b":0}}`)
	waitJob(t, base, second, func(j jobJSON) bool { return j.Status == "AWAITING_INPUT" }, 10*time.Second)
	var remote struct {
		RemoteTaskID string `json:"remote_task_id"`
	}
	for _, e := range jobEventsFull(t, base, second) {
		if e.Type == "DELIVERED" {
			require.NoError(t, json.Unmarshal(e.Data, &remote))
		}
	}
	postJSON(t, base+"/v1/jobs/"+second+"/cancel", `{}`, http.StatusOK, nil)
	select {
	case got := <-agent.cancels:
		require.NotEmpty(t, remote.RemoteTaskID)
		require.Equal(t, remote.RemoteTaskID, string(got), "the agent's own task id")
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not asked to cancel its task")
	}

	close(resume)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "AWAITING_INPUT", "RESUMED", "SUCCESS"}, types(jobEvents(t, base, id)))
	require.Equal(t, "CANCELLED", getJob(t, base, second).Status)
}

// TestA2AEndpointsSecurity: the JSON-RPC endpoint needs a key of its
// namespace, the card is public, and a push needs the attempt's token.
func TestA2AEndpointsSecurity(t *testing.T) {
	t.Parallel()
	svc := securedService(t, nil)
	base := svc.m.URL()
	keyA, _ := createKey(t, base, testAdminKey, `{"namespace":"a","scopes":["jobs:read","jobs:submit:*"]}`)
	keyB, _ := createKey(t, base, testAdminKey, `{"namespace":"b","scopes":["jobs:read","jobs:submit:*"]}`)
	get := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"0190f1c2-0000-7000-8000-000000000000"}}`

	code, _ := call(t, http.MethodGet, base+"/a2a/a/.well-known/agent-card.json", "", "")
	require.Equal(t, http.StatusOK, code, "the card is public")
	code, out := call(t, http.MethodPost, base+"/a2a/a", "", get)
	require.Equal(t, http.StatusUnauthorized, code, out)
	code, out = call(t, http.MethodPost, base+"/a2a/a", "Bearer "+keyB, get)
	require.Equal(t, http.StatusNotFound, code, out)
	code, out = call(t, http.MethodPost, base+"/a2a/a", "Bearer "+keyA, get)
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, `"code":-32001`, "an unknown task, in A2A's terms")

	// A job of namespace a is not a task of namespace b.
	newSecuredAgent(t, base, testAdminKey, "sec-a2a", "a", "sec.held", http.StatusAccepted)
	code, out = call(t, http.MethodPost, base+"/v1/jobs", "Bearer "+keyA, `{"capability":"sec.held","payload":{}}`)
	require.Equal(t, http.StatusAccepted, code, out)
	var sub struct {
		JobID string `json:"job_id"`
	}
	require.NoError(t, jsonUnmarshal(out, &sub))
	getIt := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, sub.JobID)
	_, out = call(t, http.MethodPost, base+"/a2a/a", "Bearer "+keyA, getIt)
	require.Contains(t, out, `"result"`)
	_, out = call(t, http.MethodPost, base+"/a2a/b", "Bearer "+keyB, getIt)
	require.Contains(t, out, `"code":-32001`)

	// Pushes need the attempt's token; nothing is written without it.
	waitJobAuth(t, base, "Bearer "+keyA, sub.JobID, "DELIVERED")
	before := len(jobEventsAuth(t, base, "Bearer "+keyA, sub.JobID))
	task := `{"kind":"task","id":"x","contextId":"c","status":{"state":"completed"}}`
	code, out = call(t, http.MethodPost, base+"/a2a-push/"+sub.JobID+"/1", "", task)
	require.Equal(t, http.StatusUnauthorized, code, out)
	code, out = call(t, http.MethodPost, base+"/a2a-push/"+sub.JobID+"/1", "Bearer arp_forged", task)
	require.Equal(t, http.StatusUnauthorized, code, out)
	code, out = call(t, http.MethodPost, base+"/a2a-push/"+sub.JobID+"/0", "Bearer arp_forged", task)
	require.Equal(t, http.StatusBadRequest, code, out)
	code, out = call(t, http.MethodPost, base+"/a2a-push/"+sub.JobID+"/1", "Bearer arp_forged", `{"nonsense":true}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	// Input needs a key that may act on the job, and a job that awaits it.
	input := `{"payload":{"x":1}}`
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+sub.JobID+"/input", "", input)
	require.Equal(t, http.StatusUnauthorized, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+sub.JobID+"/input", "Bearer "+keyB, input)
	require.Equal(t, http.StatusNotFound, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+sub.JobID+"/input", "Bearer "+keyA, input)
	require.Equal(t, http.StatusConflict, code, out)
	require.Len(t, jobEventsAuth(t, base, "Bearer "+keyA, sub.JobID), before)
}

func jobEventsAuth(t *testing.T, base, auth, id string) []fullEventJSON {
	t.Helper()
	code, out := call(t, http.MethodGet, base+"/v1/jobs/"+id+"/events", auth, "")
	require.Equal(t, http.StatusOK, code, out)
	var evs struct {
		Events []fullEventJSON `json:"events"`
	}
	require.NoError(t, jsonUnmarshal(out, &evs))
	return evs.Events
}

func openDB(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestA2AVersion1Agent: an agent that speaks A2A v1.0 (SendMessage,
// SendMessageResponse, TASK_STATE_* names, StreamResponse pushes) is served
// in its own terms: no v0.3 fallback, and a pushed statusUpdate that ends
// the task is completed with a GetTask for its artifacts.
func TestA2AVersion1Agent(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	var methods sync.Map
	sent := make(chan map[string]any, 1)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			_ = json.NewEncoder(w).Encode(map[string]any{"name": "v1 agent", "description": "speaks 1.0", "version": "2.0.0",
				"supportedInterfaces": []any{map[string]any{"url": srv.URL + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
				"capabilities":        map[string]any{"pushNotifications": true}, "skills": []any{map[string]any{"id": "v1.sum", "tags": []string{}}}})
			return
		}
		var req struct {
			ID     any            `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		methods.Store(req.Method, true)
		answer := func(result any) {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		task := map[string]any{"id": "task-1", "contextId": "ctx-1", "status": map[string]any{"state": "TASK_STATE_WORKING"}}
		switch req.Method {
		case "SendMessage":
			sent <- req.Params
			answer(map[string]any{"task": task})
			cfg := req.Params["configuration"].(map[string]any)["taskPushNotificationConfig"].(map[string]any)
			go func() { // later, the end of the task, without its output
				body := `{"statusUpdate":{"taskId":"task-1","contextId":"ctx-1","status":{"state":"TASK_STATE_COMPLETED"}}}`
				preq, _ := http.NewRequest(http.MethodPost, cfg["url"].(string), strings.NewReader(body))
				auth := cfg["authentication"].(map[string]any)
				preq.Header.Set("Authorization", auth["scheme"].(string)+" "+auth["credentials"].(string))
				preq.Header.Set("Content-Type", "application/a2a+json")
				if resp, err := http.DefaultClient.Do(preq); err == nil {
					resp.Body.Close()
				}
			}()
		case "GetTask":
			task["status"] = map[string]any{"state": "TASK_STATE_COMPLETED"}
			task["artifacts"] = []any{map[string]any{"artifactId": "a", "parts": []any{map[string]any{"data": map[string]any{"sum": 7}}}}}
			answer(task)
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
	}))
	t.Cleanup(srv.Close)
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q,"agent_id":"v1"}`, srv.URL+"/.well-known/agent-card.json"))
	waitState(t, base, "v1", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "v1.sum", "v1")

	id := submitOK(t, base, `{"capability":"v1.sum","payload":{"a":3,"b":4}}`)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.JSONEq(t, `{"sum":7}`, string(j.Result))
	params := <-sent
	msg := params["message"].(map[string]any)
	require.Equal(t, id, msg["messageId"])
	require.Equal(t, "ROLE_USER", msg["role"])
	require.Equal(t, map[string]any{"a": 3.0, "b": 4.0}, msg["parts"].([]any)[0].(map[string]any)["data"])
	require.Equal(t, true, params["configuration"].(map[string]any)["returnImmediately"])
	_, fellBack := methods.Load("message/send")
	require.False(t, fellBack, "a v1.0 agent is not asked in v0.3 terms")
	_, read := methods.Load("GetTask")
	require.True(t, read, "the task's output was read with GetTask")
}

// TestA2AInputReachesTheAgent: the caller's answer to input-required goes
// to the agent as a message continuing its task, by the REST API or by an
// A2A client sending to the task; the agent then finishes the job.
func TestA2AInputReachesTheAgent(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	finish := make(chan struct{})
	agent := newSDKAgent(t, "Unit Asker", []a2a.AgentSkill{{ID: "t.unit"}}, true, func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
		if rc.StoredTask == nil { // a new task: ask which unit
			ask := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "which unit?"}))
			ask.Final = true
			return q.Write(ctx, ask)
		}
		unit := rc.Message.Parts[0].(a2a.DataPart).Data["unit"]
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		select {
		case <-finish:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.DataPart{Data: map[string]any{"unit": unit}})); err != nil {
			return err
		}
		done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
		done.Final = true
		return q.Write(ctx, done)
	})
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q,"agent_id":"unit"}`, agent.srv.URL))
	waitState(t, base, "unit", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "t.unit", "unit")

	// By the REST API.
	id := submitOK(t, base, `{"capability":"t.unit","payload":{"weight":3}}`)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "AWAITING_INPUT" }, 10*time.Second)
	code, out := call(t, http.MethodPost, base+"/v1/jobs/"+id+"/input", "", `{"payload":{"unit":"kg"}}`)
	require.Equal(t, http.StatusOK, code, out)
	waitJob(t, base, id, func(j jobJSON) bool { return j.Status == "DELIVERED" }, 10*time.Second) // RESUMED
	close(finish)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.JSONEq(t, `{"unit":"kg"}`, string(j.Result))
	got := types(jobEvents(t, base, id))
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "AWAITING_INPUT"}, got[:4])
	require.ElementsMatch(t, []string{"INPUT_PROVIDED", "RESUMED"}, got[4:6], "the input, and the agent working again (in either order: its push may come first)")
	require.Equal(t, "SUCCESS", got[len(got)-1])
	var msgs []*a2a.Message
	for len(agent.messages) > 0 {
		msgs = append(msgs, <-agent.messages)
	}
	require.Len(t, msgs, 2)
	var delivered struct {
		RemoteTaskID string `json:"remote_task_id"`
	}
	require.NoError(t, json.Unmarshal(jobEvents(t, base, id)[2].Data, &delivered))
	require.Empty(t, msgs[0].TaskID)
	require.Equal(t, delivered.RemoteTaskID, string(msgs[1].TaskID), "the input continues the agent's own task")
	require.Equal(t, "kg", msgs[1].Parts[0].(a2a.DataPart).Data["unit"])

	// A job that does not await input refuses it, and writes nothing.
	before := len(jobEvents(t, base, id))
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+id+"/input", "", `{"payload":{"unit":"g"}}`)
	require.Equal(t, http.StatusConflict, code, out)
	code, out = call(t, http.MethodPost, base+"/v1/jobs/"+id+"/input", "", `{}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Len(t, jobEvents(t, base, id), before)

	// By an A2A client sending a message to the task.
	ctx := context.Background()
	card, err := agentcard.DefaultResolver.Resolve(ctx, base+"/a2a/default")
	require.NoError(t, err)
	client, err := a2aclient.NewFromCard(ctx, card)
	require.NoError(t, err)
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"weight": 5}}), Metadata: map[string]any{"skill": "t.unit"}})
	require.NoError(t, err)
	task := res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State, "a blocking send returns when the agent needs input")
	answer := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{"unit": "lb"}})
	answer.TaskID = task.ID
	res, err = client.SendMessage(ctx, &a2a.MessageSendParams{Message: answer})
	require.NoError(t, err)
	task = res.(*a2a.Task)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	require.Equal(t, "lb", task.Artifacts[0].Parts[0].(a2a.DataPart).Data["unit"])
}

// TestA2AInputTimeout: input that never comes ends the job CANCELLED after
// the input timeout, and the agent is asked to cancel its task.
func TestA2AInputTimeout(t *testing.T) {
	t.Parallel()
	svc := startTuned(t, map[string]string{"DATABASE_URL": newDatabase(t)}, func(c *Config) {
		fastSweeps(c)
		c.Jobs.InputTimeout = 500 * time.Millisecond
	}, "serve", "--insecure", "--addr", "127.0.0.1:0", "--log-level", "warn")
	base := svc.m.URL()
	waitReady(t, base)
	agent := newSDKAgent(t, "Patient", []a2a.AgentSkill{{ID: "t.patient"}}, true, func(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
		ask := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateInputRequired, nil)
		ask.Final = true
		return q.Write(ctx, ask)
	})
	registerCard(t, base, fmt.Sprintf(`{"card_url":%q}`, agent.srv.URL))
	waitState(t, base, "patient", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "t.patient", "patient")

	id := submitOK(t, base, `{"capability":"t.patient","payload":{}}`)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "CANCELLED", j.Status)
	require.Contains(t, j.Error, "input_timeout")
	require.Equal(t, []string{"SUBMITTED", "ROUTED", "DELIVERED", "AWAITING_INPUT", "CANCELLED"}, types(jobEvents(t, base, id)))
	select {
	case <-agent.cancels:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not asked to cancel its task")
	}
}

// TestA2AAgentCommand: `agentreach a2a-agent --register` runs an A2A agent
// that registers by its card; a job reaches it and comes back.
func TestA2AAgentCommand(t *testing.T) {
	t.Parallel()
	svc, _ := service(t)
	base := svc.m.URL()
	_, out := startProcess(t, "a2a-agent", "--server", base, "--register", "--name", "Echo Cmd", "--skills", "cmd.echo")
	waitFor(t, 20*time.Second, "the agent to register", func() bool { return strings.Contains(out.String(), "registered with") })
	waitState(t, base, "echo-cmd", "HEALTHY", 20*time.Second)
	waitChosen(t, base, "cmd.echo", "echo-cmd")
	id := submitOK(t, base, `{"capability":"cmd.echo","payload":{"q":"ping"}}`)
	j := waitTerminal(t, base, id, 10*time.Second)
	require.Equal(t, "SUCCESS", j.Status, j.Error)
	require.JSONEq(t, `{"echo":{"q":"ping"},"by":"Echo Cmd"}`, string(j.Result))
}
