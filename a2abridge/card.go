package a2abridge

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentreach/agentreach/domain"
)

// Well-known paths of an Agent Card: the current one, and the one of A2A
// v0.1/v0.2, tried when the current one is not there.
const (
	CardPath       = "/.well-known/agent-card.json"
	LegacyCardPath = "/.well-known/agent.json"
)

// maxCard bounds a card's size.
const maxCard = 1 << 20

// Card is an Agent Card as read from the wire: the fields Agent-Reach uses,
// from either protocol version.
type Card struct {
	Name            string `json:"name"`
	Description     string `json:"description"`
	Version         string `json:"version"`
	ProtocolVersion string `json:"protocolVersion"`
	// URL and PreferredTransport are v0.3's main interface.
	URL                  string          `json:"url"`
	PreferredTransport   string          `json:"preferredTransport"`
	AdditionalInterfaces []cardInterface `json:"additionalInterfaces"`
	// SupportedInterfaces is v1.0's list; the first entry is preferred.
	SupportedInterfaces []cardInterface `json:"supportedInterfaces"`
	Capabilities        struct {
		Streaming         bool `json:"streaming"`
		PushNotifications bool `json:"pushNotifications"`
	} `json:"capabilities"`
	Skills []struct {
		ID   string   `json:"id"`
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	} `json:"skills"`
}

type cardInterface struct {
	URL             string `json:"url"`
	Transport       string `json:"transport"`       // v0.3
	ProtocolBinding string `json:"protocolBinding"` // v1.0
	ProtocolVersion string `json:"protocolVersion"`
}

// Mapping is what a card means for an agent's registration.
type Mapping struct {
	Name         string
	Capabilities []string
	Aliases      []string
	Version      string
	Endpoint     string
	// Push says whether the agent sends push notifications; without them
	// Agent-Reach polls GetTask.
	Push      bool
	Streaming bool
	// ProtocolVersion is the A2A version the card declares.
	ProtocolVersion string
}

// ErrCard is a card that cannot be used: not JSON, no skill that makes a
// capability, or no JSON-RPC interface.
var ErrCard = domain.NewError(domain.ErrInvalid, "unusable agent card")

// ParseCard decodes a card.
func ParseCard(b []byte) (*Card, error) {
	var c Card
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: not a JSON agent card: %w", ErrCard, err)
	}
	return &c, nil
}

// Map turns a card into registration fields: skill ids become
// capabilities, skill tags aliases (each only if it is a well-formed
// capability name), the card's version the agent's version, and its
// preferred JSON-RPC interface the endpoint.
func (c *Card) Map() (Mapping, error) {
	m := Mapping{Name: c.Name, Version: c.Version, Push: c.Capabilities.PushNotifications,
		Streaming: c.Capabilities.Streaming, ProtocolVersion: c.ProtocolVersion}
	for _, s := range c.Skills {
		if domain.ValidCapability(s.ID) && !slices.Contains(m.Capabilities, s.ID) {
			m.Capabilities = append(m.Capabilities, s.ID)
		}
	}
	for _, s := range c.Skills {
		for _, t := range s.Tags {
			if domain.ValidCapability(t) && !slices.Contains(m.Capabilities, t) && !slices.Contains(m.Aliases, t) {
				m.Aliases = append(m.Aliases, t)
			}
		}
	}
	if len(m.Capabilities) == 0 {
		return m, fmt.Errorf("%w: no skill has an id usable as a capability (letters, digits, '_', '-', joined by '.', ':' or '/')", ErrCard)
	}
	m.Endpoint = c.jsonRPCURL()
	if m.Endpoint == "" {
		return m, fmt.Errorf("%w: the card offers no JSON-RPC interface", ErrCard)
	}
	if len(m.Aliases) > domain.MaxAliases {
		m.Aliases = m.Aliases[:domain.MaxAliases]
	}
	if len(m.Capabilities) > domain.MaxCapabilities {
		m.Capabilities = m.Capabilities[:domain.MaxCapabilities]
	}
	return m, nil
}

// jsonRPCURL is the URL of the card's preferred interface if it speaks
// JSON-RPC, else of the first one that does.
func (c *Card) jsonRPCURL() string {
	for _, i := range c.SupportedInterfaces {
		if strings.EqualFold(i.ProtocolBinding, "JSONRPC") || strings.EqualFold(i.Transport, "JSONRPC") {
			return i.URL
		}
	}
	if c.URL != "" && (c.PreferredTransport == "" || strings.EqualFold(c.PreferredTransport, "JSONRPC")) {
		return c.URL
	}
	for _, i := range c.AdditionalInterfaces {
		if strings.EqualFold(i.Transport, "JSONRPC") || strings.EqualFold(i.ProtocolBinding, "JSONRPC") {
			return i.URL
		}
	}
	return ""
}

// Hash fingerprints what the registry takes from a card, so a refresh
// can tell whether anything that matters changed.
func (m Mapping) Hash() []byte {
	b, _ := json.Marshal(m)
	h := sha256.Sum256(b)
	return h[:]
}

// CardURLs are the URLs to try for a card: u itself when it names a JSON
// file, else u's well-known card path, then the legacy one.
func CardURLs(u string) ([]string, error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("%w: card_url must be an http(s) URL", ErrCard)
	}
	if strings.HasSuffix(p.Path, ".json") {
		return []string{u}, nil
	}
	base := strings.TrimSuffix(p.Scheme+"://"+p.Host+p.Path, "/")
	return []string{base + CardPath, base + LegacyCardPath}, nil
}

// Fetched is one fetch of a card.
type Fetched struct {
	URL  string
	Card *Card
	Raw  []byte
	ETag string
	// MaxAge is the card's freshness lifetime from Cache-Control (zero:
	// none given); NoStore says not to keep a validator.
	MaxAge  time.Duration
	NoStore bool
	// NotModified: the server answered 304 to the validator sent.
	NotModified bool
}

// ErrNotFound is a card URL that answered 404.
var ErrNotFound = domain.NewError(domain.ErrNotFound, "agent card not found")

// Fetch GETs the card at u, sending etag as If-None-Match when it is set.
// It returns ErrNotFound for a 404 and a wrapped ErrCard for a card that
// does not decode.
func Fetch(ctx context.Context, client *http.Client, u, etag string) (Fetched, error) {
	f := Fetched{URL: u}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return f, fmt.Errorf("%w: %w", ErrCard, err)
	}
	req.Header.Set("Accept", "application/json")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := client.Do(req)
	if err != nil {
		return f, fmt.Errorf("fetch agent card %s: %w", u, err)
	}
	defer resp.Body.Close()
	f.MaxAge, f.NoStore = cacheControl(resp.Header.Get("Cache-Control"))
	f.ETag = resp.Header.Get("ETag")
	switch {
	case resp.StatusCode == http.StatusNotModified && etag != "":
		f.NotModified = true
		if f.ETag == "" {
			f.ETag = etag
		}
		return f, nil
	case resp.StatusCode == http.StatusNotFound:
		return f, fmt.Errorf("GET %s: %w", u, ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return f, fmt.Errorf("fetch agent card %s: HTTP %d", u, resp.StatusCode)
	}
	f.Raw, err = io.ReadAll(io.LimitReader(resp.Body, maxCard+1))
	if err != nil {
		return f, fmt.Errorf("fetch agent card %s: %w", u, err)
	}
	if len(f.Raw) > maxCard {
		return f, fmt.Errorf("%w: larger than 1 MiB", ErrCard)
	}
	f.Card, err = ParseCard(f.Raw)
	return f, err
}

// FetchFirst fetches the card at the first of CardURLs(u) that is there.
func FetchFirst(ctx context.Context, client *http.Client, u string) (Fetched, error) {
	urls, err := CardURLs(u)
	if err != nil {
		return Fetched{}, err
	}
	var f Fetched
	for _, cu := range urls {
		f, err = Fetch(ctx, client, cu, "")
		if !errors.Is(err, ErrNotFound) {
			break
		}
	}
	return f, err
}

var maxAgeRe = regexp.MustCompile(`(?i)(?:^|[,\s])max-age\s*=\s*"?(\d+)`)

func cacheControl(v string) (maxAge time.Duration, noStore bool) {
	lv := strings.ToLower(v)
	if strings.Contains(lv, "no-store") {
		return 0, true
	}
	if strings.Contains(lv, "no-cache") {
		return 0, false
	}
	if m := maxAgeRe.FindStringSubmatch(v); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return time.Duration(n) * time.Second, false
		}
	}
	return 0, false
}
