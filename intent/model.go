package intent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/agentreach/agentreach/netguard"
)

// ModelConfig is one OpenAI-compatible endpoint: its base URL (e.g.
// http://127.0.0.1:11434/v1 for Ollama; a URL that already ends in
// /embeddings or /chat/completions is taken as it is), the model, and the
// API key if it needs one. An empty URL turns the resolver off.
type ModelConfig struct {
	URL   string
	Model string
	// Key is sent as "Authorization: Bearer <key>" and nowhere else.
	Key string
}

// Enabled reports whether the endpoint is configured.
func (m ModelConfig) Enabled() bool { return m.URL != "" }

// String names the endpoint without its key.
func (m ModelConfig) String() string { return m.Model + " at " + m.URL }

// maxModelAnswer bounds a model's answer (a batch of embeddings).
const maxModelAnswer = 64 << 20

// modelClient calls one OpenAI-compatible endpoint.
type modelClient struct {
	http *http.Client
	cfg  ModelConfig
}

func newModelClient(cfg ModelConfig, guard *netguard.Policy, timeout time.Duration) *modelClient {
	return &modelClient{cfg: cfg, http: &http.Client{Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Proxy: nil, // a proxy would take the connection past the guard
			DialContext:         guard.DialContext(&net.Dialer{Timeout: 5 * time.Second}),
			MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}}}
}

// url is the endpoint of path ("/embeddings", "/chat/completions").
func (c *modelClient) url(path string) string {
	u := strings.TrimRight(c.cfg.URL, "/")
	if strings.HasSuffix(u, path) {
		return u
	}
	return u + path
}

// errModel is a model endpoint that did not answer usably.
var errModel = errors.New("model endpoint")

// post sends body as JSON to path and decodes the answer into out. Its
// errors name the status or what was wrong, never the key.
func (c *modelClient) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(path), bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: %w", errModel, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errModel, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return fmt.Errorf("%w %s answered %d", errModel, path, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%w %s: not an answer: %w", errModel, path, err)
	}
	return nil
}

type embeddingRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// embed returns one vector per text, in order, all of one size.
func (c *modelClient) embed(ctx context.Context, texts []string) ([][]float32, error) {
	var out embeddingResponse
	if err := c.post(ctx, "/embeddings", embeddingRequest{Model: c.cfg.Model, Input: texts}, &out); err != nil {
		return nil, err
	}
	if len(out.Data) != len(texts) {
		return nil, fmt.Errorf("%w: %d embeddings for %d texts", errModel, len(out.Data), len(texts))
	}
	vecs := make([][]float32, len(texts))
	for i, d := range out.Data {
		at := d.Index
		if at < 0 || at >= len(texts) || vecs[at] != nil {
			at = i // an answer without indexes is in order
		}
		if len(d.Embedding) == 0 || len(d.Embedding) != len(out.Data[0].Embedding) {
			return nil, fmt.Errorf("%w: embeddings of different sizes", errModel)
		}
		vecs[at] = d.Embedding
	}
	for _, v := range vecs {
		if v == nil {
			return nil, fmt.Errorf("%w: embeddings with repeated indexes", errModel)
		}
	}
	return vecs, nil
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Temperature float64       `json:"temperature"`
	MaxTokens   int           `json:"max_tokens"`
}

type chatResponse struct {
	Choices []struct {
		Message chatMessage `json:"message"`
	} `json:"choices"`
}

// chat returns the first choice's content.
func (c *modelClient) chat(ctx context.Context, msgs []chatMessage) (string, error) {
	var out chatResponse
	if err := c.post(ctx, "/chat/completions", chatRequest{Model: c.cfg.Model, Messages: msgs, MaxTokens: 64}, &out); err != nil {
		return "", err
	}
	if len(out.Choices) == 0 {
		return "", fmt.Errorf("%w: no choices", errModel)
	}
	return out.Choices[0].Message.Content, nil
}
