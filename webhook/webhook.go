// Package webhook is Agent-Reach's native push protocol, the twin of a2a/:
// the envelope an agent receives for one attempt, the answer it gives, and
// the Standard Webhooks signature on every delivery, cancel notice and
// callback (Sign, Verify). It imports nothing but the standard library, so
// the service, the Go agent SDK (sdk) and the caller client (sdk/client)
// share one definition of each.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Envelope is what an agent receives for one attempt of a job: POSTed to
// its endpoint (push), or handed out by a claim (pull).
type Envelope struct {
	JobID      string          `json:"job_id"`
	TraceID    string          `json:"trace_id"`
	Capability string          `json:"capability"`
	Payload    json.RawMessage `json:"payload"`
	Attempt    int             `json:"attempt"`
	Deadline   time.Time       `json:"deadline"`
	// ResultURL is where a later result goes; empty when the answer must
	// be inline (a direct call with an invocation grant).
	ResultURL string `json:"result_url"`
}

// The statuses of an answer.
const (
	StatusSuccess = "SUCCESS"
	StatusFailed  = "FAILED"
)

// Answer is an agent's inline answer to a delivery (a 200 body): SUCCESS
// with a result, or FAILED (the work ran and could not be done) with a
// business code.
type Answer struct {
	Status  string          `json:"status"`
	Result  json.RawMessage `json:"result,omitempty"`
	BizCode string          `json:"biz_code,omitempty"`
}

// MaxAnswerBytes bounds an agent's inline answer.
const MaxAnswerBytes = 16 << 20

// ParseAnswer reads a 200 answer's body: at most MaxAnswerBytes of JSON
// whose status is SUCCESS or FAILED; anything else is an error.
func ParseAnswer(body []byte) (Answer, error) {
	var a Answer
	if len(body) > MaxAnswerBytes || json.Unmarshal(body, &a) != nil || (a.Status != StatusSuccess && a.Status != StatusFailed) {
		return Answer{}, errors.New(`a 200 answer must be JSON {"status": "SUCCESS"|"FAILED", "result": ..., "biz_code": ...} of at most 16 MiB`)
	}
	return a, nil
}

// The Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Sign is the Standard Webhooks signature of a message: base64 of
// HMAC-SHA256 under key over "id.timestamp.body".
func Sign(key []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SetHeaders puts message id, its time and one "v1," signature per key
// (two while a key is rotated) on h.
func SetHeaders(h http.Header, id string, at time.Time, body []byte, keys ...[]byte) {
	ts := strconv.FormatInt(at.Unix(), 10)
	sigs := make([]string, len(keys))
	for i, key := range keys {
		sigs[i] = "v1," + Sign(key, id, ts, body)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}

// ErrBadSignature: a message whose headers are missing, whose timestamp is
// outside the tolerance, or none of whose signatures is the key's.
var ErrBadSignature = errors.New("signature does not verify")

// Verify checks h's Standard Webhooks signature of body under key: the
// headers are there, the timestamp is within tolerance of now, and one of
// the "v1," signatures matches (one good one is enough). Its errors are of
// ErrBadSignature, saying why.
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: webhook-id, webhook-timestamp or webhook-signature missing", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s is %s from now (tolerance %s)", ErrBadSignature,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	want := Sign(key, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		if v, sig, ok := strings.Cut(s, ","); ok && v == "v1" && hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches the key", ErrBadSignature)
}

// AgentKey is the key deliveries to an agent are signed with: the SHA-256
// of its token, which both ends hold and neither sends.
func AgentKey(token string) []byte {
	k := sha256.Sum256([]byte(token))
	return k[:]
}
