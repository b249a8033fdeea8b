package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentreach/agentreach/sql/queries"
)

var (
	qCreateDatabase = queries.Must("HarnessCreateDatabase")
	qDropDatabase   = queries.Must("HarnessDropDatabase")
)

// ScratchDatabase creates the database name on dsn's server and returns its
// URL and a function that drops it (also after ctx has ended).
func ScratchDatabase(ctx context.Context, dsn, name string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf(qCreateDatabase, ident)); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", name, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		dctx := context.WithoutCancel(ctx)
		c, err := pgx.Connect(dctx, dsn)
		if err == nil {
			_, _ = c.Exec(dctx, fmt.Sprintf(qDropDatabase, ident))
			c.Close(dctx)
		}
	}
	return u.String(), drop, nil
}

// Until calls cond every interval until it holds (true), cond fails (its
// error), ctx ends (ctx's error) or within has passed (false, nil).
func Until(ctx context.Context, within, interval time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if ok || err != nil {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// WaitReady waits until u answers 200, as /readyz does once the schema is
// current.
func WaitReady(ctx context.Context, u string, within time.Duration) error {
	ok, err := Until(ctx, within, 50*time.Millisecond, func() (bool, error) {
		_, err := Get(ctx, u)
		return err == nil, nil
	})
	if err == nil && !ok {
		err = fmt.Errorf("%s not ready within %s", u, within)
	}
	return err
}

// WaitAgentsHealthy waits until the service at base lists at least n
// HEALTHY agents.
func WaitAgentsHealthy(ctx context.Context, base string, n int, within time.Duration) error {
	ok, err := Until(ctx, within, 50*time.Millisecond, func() (bool, error) {
		b, err := Get(ctx, base+"/v1/agents?state=HEALTHY")
		var out struct {
			Agents []json.RawMessage `json:"agents"`
		}
		_ = json.Unmarshal(b, &out)
		return err == nil && len(out.Agents) >= n, nil
	})
	if err == nil && !ok {
		err = fmt.Errorf("agents not healthy within %s", within)
	}
	return err
}

// NewRequest is an HTTP request with ctx, and with a JSON body when body is
// not empty.
func NewRequest(ctx context.Context, method, u, body string) (*http.Request, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// Submit POSTs body to u (a job to /v1/jobs, an agent to /v1/agents) and
// returns the job_id of a 2xx answer. A 429 (rate_limited, overloaded:
// nothing was written) is tried again after its Retry-After, up to
// submitTries times; any other answer is an error.
func Submit(ctx context.Context, u, body string) (string, error) {
	for try := 1; ; try++ {
		req, err := NewRequest(ctx, http.MethodPost, u, body)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && try < submitTries {
			if err := sleepCtx(ctx, RetryAfter(resp.Header.Get("Retry-After"))); err != nil {
				return "", err
			}
			continue
		}
		if resp.StatusCode/100 != 2 {
			return "", fmt.Errorf("POST %s: %d %s", u, resp.StatusCode, b)
		}
		var out struct {
			JobID string `json:"job_id"`
		}
		_ = json.Unmarshal(b, &out)
		return out.JobID, nil
	}
}

// submitTries bounds Submit's tries of a submit answered 429.
const submitTries = 20

// RetryAfter is how long a Retry-After header asks to wait: its seconds,
// at least 100 ms (a header missing or 0: 100 ms), at most 10 s.
func RetryAfter(h string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || secs <= 0 {
		return 100 * time.Millisecond
	}
	return min(time.Duration(secs)*time.Second, 10*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Get reads u, and fails on any answer but 200.
func Get(ctx context.Context, u string) ([]byte, error) {
	req, err := NewRequest(ctx, http.MethodGet, u, "")
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return b, err
}

// Put PUTs the JSON body to u, and fails on any answer but 200.
func Put(ctx context.Context, u, body string) error {
	req, err := NewRequest(ctx, http.MethodPut, u, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %d %s", u, resp.StatusCode, b)
	}
	return nil
}
