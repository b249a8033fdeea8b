package a2abridge_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2abridge"
)

func TestNormalizeState(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]a2abridge.State{
		"completed": a2abridge.StateCompleted, "TASK_STATE_COMPLETED": a2abridge.StateCompleted,
		"input-required": a2abridge.StateInputRequired, "TASK_STATE_INPUT_REQUIRED": a2abridge.StateInputRequired,
		"TASK_STATE_AUTH_REQUIRED": a2abridge.StateAuthRequired, "rejected": a2abridge.StateRejected,
		"TASK_STATE_CANCELED": a2abridge.StateCanceled, "cancelled": a2abridge.StateCanceled,
		"TASK_STATE_UNSPECIFIED": a2abridge.StateUnknown, "": a2abridge.StateUnknown,
	} {
		require.Equal(t, want, a2abridge.NormalizeState(in), in)
	}
	require.True(t, a2abridge.StateRejected.Terminal())
	require.False(t, a2abridge.StateInputRequired.Terminal())
	require.True(t, a2abridge.StateAuthRequired.Interrupted())
}

func TestParseTask(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       a2abridge.Task
	}{
		{"v0.3 task with a data artifact",
			`{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"sum":3}}]}]}`,
			a2abridge.Task{ID: "t1", ContextID: "c1", State: a2abridge.StateCompleted, Result: json.RawMessage(`{"sum":3}`)}},
		{"v1.0 wrapped task with text parts",
			`{"task":{"id":"t2","contextId":"c2","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"parts":[{"text":"a"},{"text":"b"}]}]}}`,
			a2abridge.Task{ID: "t2", ContextID: "c2", State: a2abridge.StateCompleted, Result: json.RawMessage(`"a\nb"`)}},
		{"v0.3 message answer",
			`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`,
			a2abridge.Task{State: a2abridge.StateCompleted, Result: json.RawMessage(`"hi"`)}},
		{"v1.0 status update is partial",
			`{"statusUpdate":{"taskId":"t3","contextId":"c3","status":{"state":"TASK_STATE_REJECTED"}}}`,
			a2abridge.Task{ID: "t3", ContextID: "c3", State: a2abridge.StateRejected, Partial: true}},
		{"failed task keeps its status message as the result",
			`{"kind":"task","id":"t4","status":{"state":"failed","message":{"kind":"message","messageId":"x","role":"agent","parts":[{"kind":"text","text":"boom"}]}}}`,
			a2abridge.Task{ID: "t4", State: a2abridge.StateFailed, Result: json.RawMessage(`"boom"`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := a2abridge.ParseTask([]byte(c.body))
			require.NoError(t, err)
			got.Message = nil
			if c.want.Result == nil {
				require.Nil(t, got.Result)
			} else {
				require.JSONEq(t, string(c.want.Result), string(got.Result))
			}
			got.Result, c.want.Result = nil, nil
			require.Equal(t, c.want, got)
		})
	}
	for _, bad := range []string{`[]`, `{"kind":"task"}`, `{"kind":"nonsense"}`, `{}`, `not json`} {
		_, err := a2abridge.ParseTask([]byte(bad))
		require.ErrorIs(t, err, a2abridge.ErrBadTask, bad)
	}
}

func TestResultOfMixedParts(t *testing.T) {
	t.Parallel()
	parts := []json.RawMessage{json.RawMessage(`{"kind":"text","text":"x"}`), json.RawMessage(`{"kind":"data","data":{"a":1}}`)}
	require.JSONEq(t, `{"parts":[{"kind":"text","text":"x"},{"kind":"data","data":{"a":1}}]}`, string(a2abridge.ResultOf(parts)))
	require.Nil(t, a2abridge.ResultOf(nil))
}

func TestCardMap(t *testing.T) {
	t.Parallel()
	v03 := `{"name":"Calc","version":"1.2.0","url":"http://calc.example/rpc","preferredTransport":"JSONRPC",
		"capabilities":{"pushNotifications":true},
		"skills":[{"id":"math.add","tags":["math","add ition","math.add"]},{"id":"bad id"},{"id":"math.mul","tags":["math"]}]}`
	c, err := a2abridge.ParseCard([]byte(v03))
	require.NoError(t, err)
	m, err := c.Map()
	require.NoError(t, err)
	require.Equal(t, []string{"math.add", "math.mul"}, m.Capabilities)
	require.Equal(t, []string{"math"}, m.Aliases)
	require.Equal(t, "http://calc.example/rpc", m.Endpoint)
	require.Equal(t, "1.2.0", m.Version)
	require.True(t, m.Push)

	v1 := `{"name":"N","version":"2","supportedInterfaces":[{"url":"grpc://x","protocolBinding":"GRPC"},{"url":"http://n.example/a2a","protocolBinding":"JSONRPC"}],
		"skills":[{"id":"n.s","tags":[]}]}`
	c, err = a2abridge.ParseCard([]byte(v1))
	require.NoError(t, err)
	m, err = c.Map()
	require.NoError(t, err)
	require.Equal(t, "http://n.example/a2a", m.Endpoint)
	require.NotEqual(t, m.Hash(), (a2abridge.Mapping{}).Hash())

	for _, bad := range []string{`{"url":"http://x","skills":[]}`, `{"url":"http://x","skills":[{"id":"no good"}]}`,
		`{"url":"http://x","preferredTransport":"GRPC","skills":[{"id":"a"}]}`} {
		c, err := a2abridge.ParseCard([]byte(bad))
		require.NoError(t, err)
		_, err = c.Map()
		require.ErrorIs(t, err, a2abridge.ErrCard, bad)
	}
}

func TestCardURLs(t *testing.T) {
	t.Parallel()
	urls, err := a2abridge.CardURLs("http://h:1/agents/x/")
	require.NoError(t, err)
	require.Equal(t, []string{"http://h:1/agents/x" + a2abridge.CardPath, "http://h:1/agents/x" + a2abridge.LegacyCardPath}, urls)
	urls, err = a2abridge.CardURLs("https://h/card.json")
	require.NoError(t, err)
	require.Equal(t, []string{"https://h/card.json"}, urls)
	_, err = a2abridge.CardURLs("ftp://h/x")
	require.ErrorIs(t, err, a2abridge.ErrCard)
}

func TestPushToken(t *testing.T) {
	t.Parallel()
	k1, k2 := []byte("one"), []byte("two")
	tok := a2abridge.PushToken(k1, "job", 2)
	require.True(t, a2abridge.PushTokenValid([][]byte{k2, k1}, "job", 2, tok))
	require.False(t, a2abridge.PushTokenValid([][]byte{k1}, "job", 3, tok), "another attempt")
	require.False(t, a2abridge.PushTokenValid([][]byte{k1}, "other", 2, tok), "another job")
	require.False(t, a2abridge.PushTokenValid([][]byte{k2}, "job", 2, tok), "another key")
	require.False(t, a2abridge.PushTokenValid([][]byte{k1}, "job", 2, ""))
}

// BenchmarkParseTask reads one pushed v0.3 task with a data artifact: the
// work of the push ingress before it touches the database.
func BenchmarkParseTask(b *testing.B) {
	body := []byte(`{"kind":"task","id":"0b6c1f7e-1d0e-4a51-9c1e-3f4c2b1a0d9e","contextId":"c1","status":{"state":"completed",
		"timestamp":"2026-11-29T23:00:00Z"},"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"sum":3,"by":"calc"}}]}],
		"history":[{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":{"a":1,"b":2}}]}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a2abridge.ParseTask(body); err != nil {
			b.Fatal(err)
		}
	}
}
