package card

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/domain"
)

// maxCard bounds a card's size.
const maxCard = 1 << 20

// URLs are the URLs to try for a card: u itself when it names a JSON
// file, else u's well-known card path, then the legacy one.
func URLs(u string) ([]string, error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return nil, fmt.Errorf("%w: card_url must be an http(s) URL", ErrCard)
	}
	if strings.HasSuffix(p.Path, ".json") {
		return []string{u}, nil
	}
	base := strings.TrimSuffix(p.Scheme+"://"+p.Host+p.Path, "/")
	return []string{base + a2a.CardPath, base + a2a.LegacyCardPath}, nil
}

// Fetched is one fetch of a card.
type Fetched struct {
	URL  string
	Card *a2a.Card
	Raw  []byte
	ETag string
	// MaxAge is the card's freshness lifetime from Cache-Control (zero:
	// none given); NoStore says not to keep a validator.
	MaxAge  time.Duration
	NoStore bool
	// NotModified: the server answered 304 to the validator sent.
	NotModified bool
}

// KeptETag is the validator to keep for the next fetch: none when the
// card said no-store.
func (f Fetched) KeptETag() string {
	if f.NoStore {
		return ""
	}
	return f.ETag
}

// ErrNoCard is a card URL that answered 404.
var ErrNoCard = domain.NewError(domain.ErrNotFound, "agent card not found")

// Fetch GETs the card at u, sending etag as If-None-Match when it is set.
// It returns ErrNoCard for a 404 and a wrapped ErrCard for a card that
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
		return f, fmt.Errorf("GET %s: %w", u, ErrNoCard)
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
	f.Card, err = Parse(f.Raw)
	return f, err
}

// FetchFirst fetches the card at the first of URLs(u) that is there.
func FetchFirst(ctx context.Context, client *http.Client, u string) (Fetched, error) {
	urls, err := URLs(u)
	if err != nil {
		return Fetched{}, err
	}
	var f Fetched
	for _, cu := range urls {
		f, err = Fetch(ctx, client, cu, "")
		if !errors.Is(err, ErrNoCard) {
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
