package client_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/sdk/client"
	"github.com/agentreach/agentreach/webhook"
)

// signed is a callback as Agent-Reach's callback worker signs it (with
// jobs.Sign), under each of keys, at ts.
func signed(body []byte, ts time.Time, keys ...[]byte) http.Header {
	id, stamp := "msg_j1", strconv.FormatInt(ts.Unix(), 10)
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", stamp)
	sig := ""
	for i, k := range keys {
		if i > 0 {
			sig += " "
		}
		sig += "v1," + webhook.Sign(k, id, stamp, body)
	}
	h.Set("webhook-signature", sig)
	return h
}

func TestVerifyCallback(t *testing.T) {
	t.Parallel()
	key, old := []byte("0123456789abcdef0123456789abcdef"), []byte("the secret before the rotation..")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	body := []byte(`{"job_id":"j1","status":"SUCCESS"}`)
	now := time.Now()

	require.NoError(t, client.VerifyCallback(secret, signed(body, now, key), body, now))
	require.NoError(t, client.VerifyCallback(secret, signed(body, now, old, key), body, now), "one of two signatures during a rotation")
	require.NoError(t, client.VerifyCallback(secret, signed(body, now.Add(-4*time.Minute), key), body, now), "inside the tolerance")

	for name, tc := range map[string]struct {
		header http.Header
		body   []byte
	}{
		"another secret":     {signed(body, now, old), body},
		"a body changed":     {signed(body, now, key), []byte(`{"job_id":"j1","status":"FAILED"}`)},
		"too old":            {signed(body, now.Add(-6*time.Minute), key), body},
		"from the future":    {signed(body, now.Add(6*time.Minute), key), body},
		"no signature":       {http.Header{"Webhook-Id": {"msg_j1"}, "Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}}, body},
		"not a v1 signature": {func() http.Header { h := signed(body, now, key); h.Set("webhook-signature", "v2,abc"); return h }(), body},
		"a timestamp changed": {func() http.Header {
			h := signed(body, now, key)
			h.Set("webhook-timestamp", strconv.FormatInt(now.Unix()-1, 10))
			return h
		}(), body},
		"a timestamp not unix": {func() http.Header { h := signed(body, now, key); h.Set("webhook-timestamp", "yesterday"); return h }(), body},
	} {
		require.ErrorIs(t, client.VerifyCallback(secret, tc.header, tc.body, now), client.ErrBadSignature, name)
	}
	require.ErrorIs(t, client.VerifyCallback("whsec_%%%", signed(body, now, key), body, now), client.ErrInvalidArgument)
}
