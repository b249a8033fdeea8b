package a2a_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
)

func TestStateV1(t *testing.T) {
	t.Parallel()
	for v03, v1 := range map[string]string{"input-required": "TASK_STATE_INPUT_REQUIRED", "canceled": "TASK_STATE_CANCELED",
		"completed": "TASK_STATE_COMPLETED", "": ""} {
		require.Equal(t, v1, a2a.StateV1(v03))
		if v03 != "" {
			require.Equal(t, a2a.NormalizeState(v03), a2a.NormalizeState(v1), "either spelling reads as the same state")
		}
	}
}

func TestPartsBetweenVersions(t *testing.T) {
	t.Parallel()
	text := "hi"
	url := "http://x/f"
	for _, c := range []struct {
		v1  a2a.PartV1
		v03 string
	}{
		{a2a.PartV1{Text: &text, Metadata: json.RawMessage(`{"m":1}`)}, `{"kind":"text","metadata":{"m":1},"text":"hi"}`},
		{a2a.PartV1{Data: json.RawMessage(`{"a":1}`), MediaType: "application/json"}, `{"data":{"a":1},"kind":"data"}`},
		{a2a.PartV1{Data: json.RawMessage(`[1,2]`)}, `{"data":{"value":[1,2]},"kind":"data"}`},
		{a2a.PartV1{URL: &url, MediaType: "image/png"}, `{"file":{"uri":"http://x/f"},"kind":"file"}`},
		{a2a.PartV1{Data: json.RawMessage(`null`)}, `{"kind":""}`},
	} {
		b, err := json.Marshal(c.v1.V03())
		require.NoError(t, err)
		require.Equal(t, c.v03, string(b))
	}
	var p a2a.PartV03
	require.NoError(t, json.Unmarshal([]byte(`{"kind":"file","file":{"bytes":"AA==","mimeType":"image/png","name":"f.png"}}`), &p))
	b, err := json.Marshal(p.V1())
	require.NoError(t, err)
	require.Equal(t, `{"filename":"f.png","mediaType":"image/png","raw":"AA=="}`, string(b))
}

// A message round-trips between the versions: what one version says, the
// other says too.
func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	in := `{"contextId":"c","extensions":["e"],"messageId":"m","metadata":{"k":"v"},"parts":[{"text":"a"},{"data":{"x":1}}],` +
		`"referenceTaskIds":["t0"],"role":"ROLE_AGENT","taskId":"t"}`
	var m a2a.MessageV1
	require.NoError(t, json.Unmarshal([]byte(in), &m))
	v03 := m.V03()
	require.Equal(t, "agent", v03.Role)
	require.Equal(t, "message", v03.Kind)
	b, err := json.Marshal(v03.V1())
	require.NoError(t, err)
	require.Equal(t, in, string(b))

	var none a2a.MessageV1
	require.NoError(t, json.Unmarshal([]byte(`{"messageId":"m","role":"ROLE_USER"}`), &none))
	b, err = json.Marshal(none.V03())
	require.NoError(t, err)
	require.Equal(t, `{"kind":"message","messageId":"m","role":"user"}`, string(b), "parts a message lacks stay lacking")
}

func TestReadSendParams(t *testing.T) {
	t.Parallel()
	p, err := a2a.ReadSendParams([]byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"kind":"text","text":"a"},{"data":5}]},
		"configuration":{"returnImmediately":false,"historyLength":2,"taskPushNotificationConfig":{"url":"http://cb","token":"t",
		"authentication":{"scheme":"Basic","credentials":"c"}}},"metadata":{"skill":"s"}}`))
	require.NoError(t, err)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.Equal(t, `{"configuration":{"blocking":true,"historyLength":2,"pushNotificationConfig":{"authentication":{"credentials":"c","schemes":["Basic"]},`+
		`"token":"t","url":"http://cb"}},"message":{"kind":"message","messageId":"m","parts":[{"kind":"text","text":"a"},{"data":{"value":5},"kind":"data"}],`+
		`"role":"user"},"metadata":{"skill":"s"}}`, string(b))
}
