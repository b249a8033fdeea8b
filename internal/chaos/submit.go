package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentreach/agentreach/internal/harness"
)

// submitter submits a run's jobs from several workers, each job retried
// with the same Idempotency-Key until a service accepts it.
type submitter struct {
	pick     func(int) string
	callback string
	jobs     int

	next      atomic.Int64 // the next job to submit
	submitted atomic.Int64
	ids       sync.Map // accepted job id → true
	wg        sync.WaitGroup
	done      chan struct{} // closed when every worker has returned
}

func (s *submitter) start(ctx context.Context, workers int) {
	s.done = make(chan struct{})
	for w := range workers {
		s.wg.Go(func() { s.work(ctx, w) })
	}
	go func() { s.wg.Wait(); close(s.done) }()
}

func (s *submitter) wait() { s.wg.Wait() }

// waitFor waits until n jobs are accepted, every worker has returned, or
// ctx ends.
func (s *submitter) waitFor(ctx context.Context, n int64) {
	for s.submitted.Load() < n {
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-time.After(10 * time.Millisecond): // poll interval while waiting on the condition
		}
	}
}

// accepted counts the distinct jobs accepted.
func (s *submitter) accepted() int {
	n := 0
	s.ids.Range(func(any, any) bool { n++; return true })
	return n
}

// work submits jobs until none is left, or one is given up on.
func (s *submitter) work(ctx context.Context, w int) {
	client := &http.Client{Timeout: 10 * time.Second}
	for i := int(s.next.Add(1)) - 1; i < s.jobs; i = int(s.next.Add(1)) - 1 {
		if !s.submit(ctx, client, w, i) {
			return
		}
	}
}

// submit retries job i through the live services until one accepts it,
// and reports false when it gave up (ctx ended, or 200 tries).
func (s *submitter) submit(ctx context.Context, client *http.Client, w, i int) bool {
	body := fmt.Sprintf(`{"capability":"chaos.work","payload":{"i":%d},"timeout_ms":2000,"max_attempts":5,"backoff_base_ms":200,"callback_url":%q}`, i, s.callback)
	key := fmt.Sprintf("chaos-%d", i)
	for try := 0; ; try++ {
		if id := submitOnce(ctx, client, s.pick(w+try), body, key); id != "" {
			s.ids.Store(id, true)
			s.submitted.Add(1)
			return true
		}
		if ctx.Err() != nil || try > 200 {
			return false
		}
		time.Sleep(100 * time.Millisecond) // the service or database is down: a caller retries later
	}
}

// submitOnce POSTs a job to base and returns its id when it was accepted.
func submitOnce(ctx context.Context, client *http.Client, base, body, key string) string {
	req, err := harness.NewRequest(ctx, http.MethodPost, base+"/v1/jobs", body)
	if err != nil {
		return ""
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var out struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusAccepted {
		return ""
	}
	return out.JobID
}
