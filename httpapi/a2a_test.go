package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNormalizeA2ARequest(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"v1.0 SendMessage becomes message/send",
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER",
				"parts":[{"text":"hi"},{"data":{"a":1}},{"data":[1,2]},{"url":"http://x/f"}]},
				"configuration":{"returnImmediately":true,"taskPushNotificationConfig":{"url":"http://cb","authentication":{"scheme":"Bearer","credentials":"c"}}}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user",
				"parts":[{"kind":"text","text":"hi"},{"kind":"data","data":{"a":1}},{"kind":"data","data":{"value":[1,2]}},{"kind":"file","url":"http://x/f","file":{"uri":"http://x/f"}}]},
				"configuration":{"blocking":false,"pushNotificationConfig":{"url":"http://cb","authentication":{"scheme":"Bearer","schemes":["Bearer"],"credentials":"c"}}}}}`},
		{"v1.0 GetTask becomes tasks/get",
			`{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{"id":"t"}}`,
			`{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"id":"t"}}`},
		{"v0.3 passes as is",
			`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.JSONEq(t, c.want, string(normalizeA2ARequest([]byte(c.in))))
		})
	}
	require.Equal(t, "not json", string(normalizeA2ARequest([]byte("not json"))), "what is not JSON is left to the JSON-RPC parser")
}

func TestV1Response(t *testing.T) {
	t.Parallel()
	v03 := `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required",
		"message":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"which?"}]}},
		"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"state":"kept as data"}}]}]}}`
	require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_INPUT_REQUIRED",
		"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"which?"}]}},
		"artifacts":[{"artifactId":"a","parts":[{"data":{"state":"kept as data"}}]}]}}}`,
		string(v1Response("SendMessage", []byte(v03))))
	errBody := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"task not found"}}`
	require.Equal(t, errBody, string(v1Response("GetTask", []byte(errBody))), "errors pass as they are")
}
