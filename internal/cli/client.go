package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/agentreach/agentreach/sdk/client"
)

// Client is the command line's client of the HTTP API: where the flags
// say the service is and which key to send, over sdk/client (the callers'
// Go client), so the CLI and callers' programs share one HTTP stack.
type Client struct {
	BaseURL string
	Key     string // sent as a bearer token when set
	HTTP    *http.Client
}

// APIError is an error answer of the API, shown to the user as it is.
type APIError = client.APIError

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

// SDK answers the sdk/client Client for the flags as parsed: no lookup
// cache (a command runs once), nothing logged.
func (c *Client) SDK() (*client.Client, error) { return c.sdk() }

// sdk is SDK with more options.
func (c *Client) sdk(opts ...client.Option) (*client.Client, error) {
	h := c.HTTP
	if h == nil {
		h = &http.Client{Timeout: 15 * time.Second}
	}
	opts = append([]client.Option{client.HTTPClient(h), client.CacheSize(0), client.Logger(slog.New(slog.DiscardHandler))}, opts...)
	sc, err := client.New(c.BaseURL, c.Key, opts...)
	if err != nil {
		return nil, fmt.Errorf("--server / AGENTREACH_URL: %w", err)
	}
	return sc, nil
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
	return c.call(func(sc *client.Client) error { return sc.Do(ctx, method, path, body, into) })
}

// call runs f with the SDK's client: an error answer is the *APIError
// alone, as the commands show it, and no answer says how to start the
// service.
func (c *Client) call(f func(*client.Client) error) error {
	sc, err := c.SDK()
	if err != nil {
		return err
	}
	if err := f(sc); err != nil {
		var apiErr *APIError
		if errors.As(err, &apiErr) {
			return apiErr // shown as it is, without the SDK's context
		}
		if errors.Is(err, client.ErrUnreachable) {
			return fmt.Errorf("cannot reach Agent-Reach at %s (start it with `agentreach dev`, or set --server / AGENTREACH_URL): %w", c.BaseURL, err)
		}
		return err
	}
	return nil
}
