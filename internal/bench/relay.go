package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentreach/agentreach/webhook"
)

// relay is the floor of any durable design on this machine: the service's
// three HTTP exchanges a job (a caller's submit answered 202, a delivery
// to an inline agent, a callback to the caller's receiver), signed as the
// service signs them, with routing from an in-memory list of the same
// agents (round robin, cheaper than the service's scoring), and nothing
// written anywhere. A crash loses every job it holds.
type relay struct {
	agents []string
	client *http.Client
	next   atomic.Uint64
	key    []byte
	failed atomic.Int64
}

// relaySubmit is what the relay reads of a submit.
type relaySubmit struct {
	Capability  string          `json:"capability"`
	Payload     json.RawMessage `json:"payload"`
	CallbackURL string          `json:"callback_url"`
}

func newRelay(agents []string) *relay {
	return &relay{agents: agents, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}},
		key: []byte("bench-relay-signing-key-0123456789")}
}

// ServeHTTP takes a submit (POST /v1/jobs): 202 with the job's id at once,
// then its delivery and callback.
func (rl *relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var sub relaySubmit
	if err := json.NewDecoder(req.Body).Decode(&sub); err != nil || sub.Capability == "" {
		http.Error(w, `{"code":"invalid_argument"}`, http.StatusBadRequest)
		return
	}
	id := uuid.Must(uuid.NewV7()).String()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = fmt.Fprintf(w, `{"job_id":%q,"status":"SUBMITTED"}`, id)
	go rl.carry(id, sub)
}

// carry delivers job id to the next agent and calls the caller back with
// the agent's answer.
func (rl *relay) carry(id string, sub relaySubmit) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agent := rl.agents[rl.next.Add(1)%uint64(len(rl.agents))]
	env, _ := json.Marshal(webhook.Envelope{JobID: id, Capability: sub.Capability, Payload: sub.Payload, Attempt: 1, Deadline: time.Now().Add(30 * time.Second)})
	answer, err := rl.post(ctx, agent, id+".1", env)
	if err != nil {
		rl.failed.Add(1)
		return
	}
	var a webhook.Answer
	if err := json.Unmarshal(answer, &a); err != nil {
		rl.failed.Add(1)
		return
	}
	cb, _ := json.Marshal(map[string]any{"job_id": id, "status": a.Status, "result": a.Result, "attempts": 1})
	if _, err := rl.post(ctx, sub.CallbackURL, id+".callback", cb); err != nil {
		rl.failed.Add(1)
	}
}

func (rl *relay) post(ctx context.Context, url, msgID string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	webhook.SetHeaders(req.Header, msgID, time.Now(), body, rl.key)
	resp, err := rl.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode >= 300 {
		err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return out, err
}

// relayEndToEnd measures the relay as endToEnd measures the service: the
// same jobs, clients, agents and callback receiver.
func (r *run) relayEndToEnd(ctx context.Context) error {
	urls := make([]string, len(r.agents))
	for i, a := range r.agents {
		urls[i] = a.URL
	}
	rl := newRelay(urls)
	srv := httptest.NewServer(rl)
	defer srv.Close()
	defer rl.client.CloseIdleConnections()
	r.progress("no-durability relay, %d jobs with callbacks (nothing written) …", r.o.jobs)
	r.acked.Store(0)
	rate, _, err := benchEndToEnd(ctx, srv.URL, r.receiver.URL, "bench.echo", r.o.jobs, false, &r.acked)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if n := rl.failed.Load(); n > 0 {
		return fmt.Errorf("relay: %d jobs failed on the way", n)
	}
	r.relayRate = rate
	r.progress("relay: %.0f jobs/s", rate)
	r.bars = append(r.bars, chartBar{label: "no-durability relay", value: rate})
	ratio, river := "n/a", ""
	if r.peak > 0 {
		ratio = fmt.Sprintf("end to end %.2f × the relay (aim ≥ 0.5)", r.peak/rate)
	}
	if r.riverRate > 0 {
		river = fmt.Sprintf("bare River %s jobs/s (%.2f × the relay)", fmtRate(r.riverRate), r.riverRate/rate)
	}
	r.res.add("no-durability relay jobs/s: the same three HTTP exchanges a job, signed, routed round robin, nothing written", fmt.Sprintf("%.0f", rate), river, ratio)
	return nil
}
