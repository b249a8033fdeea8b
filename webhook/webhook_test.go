package webhook_test

import (
	"encoding/base64"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/webhook"
)

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	key, old, other := []byte("key"), []byte("old key"), []byte("someone else's")
	body := []byte(`{"job_id":"j"}`)
	signed := func(at time.Time, keys ...[]byte) http.Header {
		h := http.Header{}
		webhook.SetHeaders(h, "j.1", at, body, keys...)
		return h
	}
	cases := []struct {
		name string
		h    http.Header
		body []byte
		ok   bool
	}{
		{"signed with the key", signed(now, key), body, true},
		{"during a rotation: two signatures, one good", signed(now, old, key), body, true},
		{"another key", signed(now, other), body, false},
		{"another body", signed(now, key), []byte(`{"job_id":"k"}`), false},
		{"within the tolerance", signed(now.Add(-4*time.Minute), key), body, true},
		{"too old", signed(now.Add(-6*time.Minute), key), body, false},
		{"from the future", signed(now.Add(6*time.Minute), key), body, false},
		{"no headers", http.Header{}, body, false},
		{"not v1", func() http.Header {
			h := signed(now, key)
			h.Set(webhook.HeaderSignature, "v2,"+webhook.Sign(key, "j.1", h.Get(webhook.HeaderTimestamp), body))
			return h
		}(), body, false},
	}
	for _, c := range cases {
		err := webhook.Verify(key, c.h, c.body, now, 5*time.Minute)
		if c.ok {
			require.NoError(t, err, c.name)
		} else {
			require.ErrorIs(t, err, webhook.ErrBadSignature, c.name)
		}
	}
	// The Standard Webhooks test vector: its secret, message id, timestamp,
	// body and signature.
	vec := http.Header{}
	vec.Set(webhook.HeaderID, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	vec.Set(webhook.HeaderTimestamp, "1614265330")
	vec.Set(webhook.HeaderSignature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	secret, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // whsec_MfKQ…
	require.NoError(t, err)
	require.NoError(t, webhook.Verify(secret, vec, []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0), time.Minute))
}

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body string
		ok   bool
	}{
		{`{"status":"SUCCESS","result":{"a":1}}`, true},
		{`{"status":"FAILED","biz_code":"no_stock"}`, true},
		{`{"status":"DONE"}`, false},
		{`{}`, false},
		{`not json`, false},
	}
	for _, c := range cases {
		a, err := webhook.ParseAnswer([]byte(c.body))
		if c.ok {
			require.NoError(t, err, c.body)
			require.NotEmpty(t, a.Status)
		} else {
			require.Error(t, err, c.body)
		}
	}
	big := append([]byte(`{"status":"SUCCESS","result":"`), make([]byte, webhook.MaxAnswerBytes)...)
	_, err := webhook.ParseAnswer(append(big, `"}`...))
	require.Error(t, err, "over MaxAnswerBytes")
}
