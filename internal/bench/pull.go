package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// pullCapability is the capability of the bench's pull agents: the push
// agents have another (bench.echo), so that neither takes part in the
// other's measurement.
const pullCapability = "bench.pull"

// A pull agent's claim: up to pullClaimMax deliveries, waiting up to
// pullWaitMS for the first.
const (
	pullClaimMax = 32
	pullWaitMS   = 1000
)

// envelope is what the bench's pull agents read of a delivery.
type envelope struct {
	JobID     string `json:"job_id"`
	Attempt   int    `json:"attempt"`
	ResultURL string `json:"result_url"`
}

// puller is a pull agent of the bench: it claims in a loop and reports
// each delivery SUCCESS at once.
type puller struct {
	base, id, token string
	client          *http.Client
}

// startPullers registers n pull agents of pullCapability at base and
// starts their claim loops, which run until ctx ends or one of them fails.
// The context it returns ends when one fails, with that failure as its
// cause, for the measurement to stop on; stop ends the loops and waits
// until they have returned (a second call does nothing more).
func startPullers(ctx context.Context, base string, n int) (lctx context.Context, stop func(), err error) {
	transport := &http.Transport{MaxIdleConnsPerHost: n * (pullClaimMax + 1)}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	var pullers []*puller
	for i := range n {
		p := &puller{base: base, id: fmt.Sprintf("bench-pull-%d", i), client: client}
		if err := p.register(ctx); err != nil {
			transport.CloseIdleConnections()
			return nil, nil, err
		}
		pullers = append(pullers, p)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	for _, p := range pullers {
		wg.Go(func() {
			if err := p.run(lctx); err != nil {
				cancel(fmt.Errorf("pull agent %s: %w", p.id, err))
			}
		})
	}
	return lctx, func() {
		cancel(nil)
		wg.Wait()
		transport.CloseIdleConnections()
	}, nil
}

// register registers the agent in pull mode, with no endpoint and no
// bound on its slots (as the push agents), and keeps its token.
func (p *puller) register(ctx context.Context) error {
	body := fmt.Sprintf(`{"agent_id":%q,"capabilities":[%q],"mode":"pull","ttl_seconds":%d}`, p.id, pullCapability, agentTTLSeconds)
	var out struct {
		Token string `json:"token"`
	}
	if err := p.post(ctx, p.base+"/v1/agents", "", body, http.StatusCreated, &out); err != nil {
		return err
	}
	p.token = out.Token
	return nil
}

// run claims until ctx ends, reporting each claim's deliveries SUCCESS at
// once, concurrently, before it claims again; a claim or a report that
// fails while ctx lives is its error.
func (p *puller) run(ctx context.Context) error {
	claim := p.base + "/v1/agents/" + p.id + "/claim"
	body := fmt.Sprintf(`{"max":%d,"wait_ms":%d}`, pullClaimMax, pullWaitMS)
	for ctx.Err() == nil {
		var out struct {
			Deliveries []envelope `json:"deliveries"`
		}
		if err := p.post(ctx, claim, p.token, body, http.StatusOK, &out); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		errs := make([]error, len(out.Deliveries))
		var wg sync.WaitGroup
		for i, env := range out.Deliveries {
			wg.Go(func() {
				errs[i] = p.post(ctx, env.ResultURL, p.token,
					fmt.Sprintf(`{"status":"SUCCESS","result":{"ok":true},"attempt":%d}`, env.Attempt), http.StatusOK, nil)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// post POSTs body to u, with the agent token tok when there is one, and
// decodes the answer into out (unless nil); an answer but want is an
// error.
func (p *puller) post(ctx context.Context, u, tok, body string, want int, out any) error {
	req, err := harness.NewRequest(ctx, http.MethodPost, u, body)
	if err != nil {
		return err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: %w", u, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d %s", u, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("POST %s: %w", u, err)
	}
	return nil
}
