package httpapi

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkDecodeError fails unless err is nil or an error the API answers
// with a 4xx.
func checkDecodeError(t *testing.T, body []byte, err error) {
	t.Helper()
	if err == nil {
		return
	}
	status := statusOf[toAPIError(err).Code]
	require.True(t, status >= 400 && status < 500, "body %q gave %d: %v", body, status, err)
}

// FuzzDecodeSubmit feeds the submit decoder arbitrary bodies: it must never
// panic nor produce anything but a 4xx.
func FuzzDecodeSubmit(f *testing.F) {
	for _, seed := range []string{
		`{"capability":"doc:parse","payload":{"a":1}}`,
		`{"capability":"doc:parse","payload":{},"priority":"high","timeout_ms":1000,"max_attempts":3,"callback_url":"http://127.0.0.1:9/cb"}`,
		`{"capability":"x","payload":null}`,
		`{"capability":"x","payload":[1,2,3],"constraints":{"version":"1.*","protocol":"a2a"},"backoff_base_ms":100,"backoff_max_ms":50}`,
		`{"capability":1}`, `[]`, `null`, ``, `{"capability":"x","payload":{}}{}`, `{"unknown":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, err := DecodeSubmit(bytes.NewReader(body), "default")
		checkDecodeError(t, body, err)
		if err == nil {
			require.NotEmpty(t, sub.Capability)
			require.NotEmpty(t, sub.Namespace)
			require.Positive(t, sub.MaxAttempts)
		}
	})
}

// FuzzDecodeRegistration does the same for agent registrations.
func FuzzDecodeRegistration(f *testing.F) {
	for _, seed := range []string{
		`{"agent_id":"a-1","capabilities":["doc:parse"],"endpoint":"http://127.0.0.1:8081/jobs"}`,
		`{"agent_id":"a-1","capabilities":["doc:parse","x.y"],"aliases":["pdf"],"endpoint":"https://agent.example/x","weight":100,"max_concurrent":4,"rollout_percent":10,"ttl_seconds":60,"context":{"accepting":false}}`,
		`{"agent_id":"","capabilities":[],"endpoint":"ftp://x"}`,
		`{"agent_id":"a","capabilities":["x"],"endpoint":"http://[::1]:80/","weight":0}`,
		`{"capabilities":"x"}`, `{}`, `"str"`, `{"agent_id":"a","capabilities":["x"],"endpoint":"http://h/","protocol":"grpc"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		reg, err := DecodeRegistration(bytes.NewReader(body), "default")
		checkDecodeError(t, body, err)
		if err == nil {
			require.NotEmpty(t, reg.AgentID)
			require.NotEmpty(t, reg.Capabilities)
			require.NotEmpty(t, reg.Endpoint)
		}
	})
}
