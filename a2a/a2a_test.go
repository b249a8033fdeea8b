package a2a_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
)

func TestNormalizeState(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]a2a.State{
		"completed": a2a.StateCompleted, "TASK_STATE_COMPLETED": a2a.StateCompleted,
		"input-required": a2a.StateInputRequired, "TASK_STATE_INPUT_REQUIRED": a2a.StateInputRequired,
		"TASK_STATE_AUTH_REQUIRED": a2a.StateAuthRequired, "rejected": a2a.StateRejected,
		"TASK_STATE_CANCELED": a2a.StateCanceled, "cancelled": a2a.StateCanceled,
		"TASK_STATE_UNSPECIFIED": a2a.StateUnknown, "": a2a.StateUnknown,
	} {
		require.Equal(t, want, a2a.NormalizeState(in), in)
	}
	require.True(t, a2a.StateRejected.Terminal())
	require.False(t, a2a.StateInputRequired.Terminal())
	require.True(t, a2a.StateAuthRequired.Interrupted())
}

func TestParseTask(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		want       a2a.Task
	}{
		{"v0.3 task with a data artifact",
			`{"kind":"task","id":"t1","contextId":"c1","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"sum":3}}]}]}`,
			a2a.Task{ID: "t1", ContextID: "c1", State: a2a.StateCompleted, Result: json.RawMessage(`{"sum":3}`)}},
		{"v1.0 wrapped task with text parts",
			`{"task":{"id":"t2","contextId":"c2","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"parts":[{"text":"a"},{"text":"b"}]}]}}`,
			a2a.Task{ID: "t2", ContextID: "c2", State: a2a.StateCompleted, Result: json.RawMessage(`"a\nb"`)}},
		{"v0.3 message answer",
			`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"hi"}]}`,
			a2a.Task{State: a2a.StateCompleted, Result: json.RawMessage(`"hi"`)}},
		{"v1.0 status update is partial",
			`{"statusUpdate":{"taskId":"t3","contextId":"c3","status":{"state":"TASK_STATE_REJECTED"}}}`,
			a2a.Task{ID: "t3", ContextID: "c3", State: a2a.StateRejected, Partial: true}},
		{"a task without artifacts reads its status message, and says so",
			`{"kind":"task","id":"t4","status":{"state":"failed","message":{"kind":"message","messageId":"x","role":"agent","parts":[{"kind":"text","text":"boom"}]}}}`,
			a2a.Task{ID: "t4", State: a2a.StateFailed, Result: json.RawMessage(`"boom"`), FromMessage: true}},
		{"artifacts are the result, whatever the status says",
			`{"kind":"task","id":"t5","status":{"state":"failed","message":{"kind":"message","messageId":"x","role":"agent","parts":[{"kind":"text","text":"half"}]}},` +
				`"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"done":1}}]}]}`,
			a2a.Task{ID: "t5", State: a2a.StateFailed, Result: json.RawMessage(`{"done":1}`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := a2a.ParseTask([]byte(c.body))
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
	failed, err := a2a.ParseTask([]byte(`{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_FAILED","message":{"messageId":"m",` +
		`"role":"ROLE_AGENT","parts":[{"text":"out of"},{"data":{"x":1}},{"text":"paper"}]}}}}`))
	require.NoError(t, err)
	require.Equal(t, "out of\npaper", failed.StatusText(), "the status message's text parts")
	require.Empty(t, a2a.Task{}.StatusText())
	for _, bad := range []string{`[]`, `{"kind":"task"}`, `{"kind":"nonsense"}`, `{}`, `not json`} {
		_, err := a2a.ParseTask([]byte(bad))
		require.ErrorIs(t, err, a2a.ErrBadTask, bad)
	}
}

func TestResultOfMixedParts(t *testing.T) {
	t.Parallel()
	parts := []json.RawMessage{json.RawMessage(`{"kind":"text","text":"x"}`), json.RawMessage(`{"kind":"data","data":{"a":1}}`)}
	require.JSONEq(t, `{"parts":[{"kind":"text","text":"x"},{"kind":"data","data":{"a":1}}]}`, string(a2a.ResultOf(parts)))
	require.Nil(t, a2a.ResultOf(nil))
}

func TestPushToken(t *testing.T) {
	t.Parallel()
	k1, k2 := []byte("one"), []byte("two")
	tok := a2a.PushToken(k1, "job", 2)
	require.True(t, a2a.PushTokenValid([][]byte{k2, k1}, "job", 2, tok))
	require.False(t, a2a.PushTokenValid([][]byte{k1}, "job", 3, tok), "another attempt")
	require.False(t, a2a.PushTokenValid([][]byte{k1}, "other", 2, tok), "another job")
	require.False(t, a2a.PushTokenValid([][]byte{k2}, "job", 2, tok), "another key")
	require.False(t, a2a.PushTokenValid([][]byte{k1}, "job", 2, ""))
}

// BenchmarkParseTask reads one pushed v0.3 task with a data artifact: the
// work of the push ingress before it touches the database.
func BenchmarkParseTask(b *testing.B) {
	body := []byte(`{"kind":"task","id":"0b6c1f7e-1d0e-4a51-9c1e-3f4c2b1a0d9e","contextId":"c1","status":{"state":"completed",
		"timestamp":"2026-11-29T23:00:00Z"},"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"sum":3,"by":"calc"}}]}],
		"history":[{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":{"a":1,"b":2}}]}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a2a.ParseTask(body); err != nil {
			b.Fatal(err)
		}
	}
}
