package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CallbackTolerance is how far a callback's webhook-timestamp may be from
// now, either way, before VerifyCallback refuses it as a replay.
const CallbackTolerance = 5 * time.Minute

// Callback is the body Agent-Reach POSTs to a job's callback_url when it
// reaches a terminal state.
type Callback struct {
	JobID      string          `json:"job_id"`
	Status     Status          `json:"status"`
	Result     json.RawMessage `json:"result"`
	BizCode    string          `json:"biz_code"`
	Error      string          `json:"error"`
	Attempts   int             `json:"attempts"`
	AgentID    string          `json:"agent_id"`
	FinishedAt time.Time       `json:"finished_at"`
	TraceID    string          `json:"trace_id"`
}

// VerifyCallback checks a callback's Standard Webhooks signature: header's
// webhook-signature must hold a "v1,<base64 HMAC-SHA256>" of
// "webhook-id.webhook-timestamp.body" under secret ("whsec_<base64>", from
// GET /v1/callbacks/secret), and its timestamp must be within
// CallbackTolerance of now. During a secret's rotation callbacks carry
// two signatures; one good one is enough. Errors: ErrBadSignature (with
// why), ErrInvalidArgument for a secret that is not whsec_<base64>.
func VerifyCallback(secret string, header http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return fmt.Errorf("%w: callback secret is not whsec_<base64>", ErrInvalidArgument)
	}
	id, ts, sigs := header.Get("webhook-id"), header.Get("webhook-timestamp"), header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: webhook-id, webhook-timestamp or webhook-signature missing", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > CallbackTolerance || d < -CallbackTolerance {
		return fmt.Errorf("%w: timestamp %s is %s from now (tolerance %s)", ErrBadSignature,
			time.Unix(sec, 0).UTC().Format(time.RFC3339), d.Round(time.Second), CallbackTolerance)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches the secret", ErrBadSignature)
}
