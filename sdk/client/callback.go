package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentreach/agentreach/webhook"
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
	if err := webhook.Verify(key, header, body, now, CallbackTolerance); err != nil {
		return fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	return nil
}
