package sdk_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk"
)

// sign signs like Agent-Reach does: HMAC-SHA256 keyed with sha256(token)
// over "id.timestamp.body".
func sign(token, id, ts string, body []byte) string {
	key := sha256.Sum256([]byte(token))
	mac := hmac.New(sha256.New, key[:])
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestVerifyDelivery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"job_id":"j1","payload":{}}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	headers := func(sigs string, ts string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", "j1.1")
		h.Set("webhook-timestamp", ts)
		h.Set("webhook-signature", sigs)
		return h
	}
	good := sign("art_new", "j1.1", ts, body)
	old := sign("art_old", "j1.1", ts, body)

	require.NoError(t, sdk.VerifyDelivery("art_new", headers(good, ts), body, now))
	// During a rotation both signatures travel; either token verifies.
	require.NoError(t, sdk.VerifyDelivery("art_old", headers(good+" "+old, ts), body, now))
	require.NoError(t, sdk.VerifyDelivery("art_new", headers(old+" "+good, ts), body, now))

	for name, err := range map[string]error{
		"wrong token":   sdk.VerifyDelivery("art_other", headers(good, ts), body, now),
		"tampered body": sdk.VerifyDelivery("art_new", headers(good, ts), []byte(`{"job_id":"j2"}`), now),
		"too old":       sdk.VerifyDelivery("art_new", headers(good, ts), body, now.Add(6*time.Minute)),
		"no timestamp":  sdk.VerifyDelivery("art_new", headers(good, ""), body, now),
		"not signed":    sdk.VerifyDelivery("art_new", headers("", ts), body, now),
		"no token yet":  sdk.VerifyDelivery("", headers(good, ts), body, now),
		"other scheme":  sdk.VerifyDelivery("art_new", headers("v2,"+good[3:], ts), body, now),
	} {
		require.True(t, errors.Is(err, sdk.ErrBadSignature), "%s: %v", name, err)
	}
}
