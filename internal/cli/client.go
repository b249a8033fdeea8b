package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client is the command line's client of the HTTP API.
type Client struct {
	BaseURL string
	Key     string // sent as a bearer token when set
	HTTP    *http.Client
	Header  map[string]string // extra request headers (empty values are skipped)
}

// APIError is an error answer of the API, shown to the user as it is.
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	if e.Field != "" {
		msg += " [field " + e.Field + "]"
	}
	return msg
}

// APIFlags returns the flag set of `agentreach name` with the flags of a
// command that calls the API (--server, --key, --json), and the client
// those flags configure once parsed.
func APIFlags(env Env, name string) (*Flags, *Client) {
	fs := &Flags{FlagSet: env.NewFlagSet(name)}
	c := &Client{HTTP: &http.Client{Timeout: 15 * time.Second}}
	fs.StringVar(&c.BaseURL, "server", env.Lookup("AGENTREACH_URL", "http://127.0.0.1:8080"), "Agent-Reach base URL (env AGENTREACH_URL)")
	SecretVar(fs.FlagSet, &c.Key, "key", env.Getenv("AGENTREACH_KEY"), "API key (env AGENTREACH_KEY)")
	fs.BoolVar(&fs.JSON, "json", false, "print JSON for scripts")
	return fs, c
}

// Get is Do of a GET with query q.
func (c *Client) Get(ctx context.Context, path string, q url.Values, into any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.Do(ctx, http.MethodGet, path, nil, into)
}

// Do sends a request with an optional JSON body and decodes a JSON answer
// into into (if not nil); an error answer becomes an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body, into any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach Agent-Reach at %s (start it with `agentreach dev`, or set --server / AGENTREACH_URL): %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return answerError(resp.StatusCode, b)
	}
	if into == nil || len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, into)
}

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.Header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	return req, nil
}

// answerError reads the API's error body; a body that is not one is the
// message of an "http_error".
func answerError(status int, b []byte) *APIError {
	var body struct {
		Error APIError `json:"error"`
	}
	_ = json.Unmarshal(b, &body)
	body.Error.Status = status
	if body.Error.Code == "" {
		body.Error.Code, body.Error.Message = "http_error", strings.TrimSpace(string(b))
	}
	return &body.Error
}
