package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a"
)

func TestRequestV03(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"v1.0 SendMessage becomes message/send",
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER",
				"parts":[{"text":"hi"},{"data":{"a":1}},{"data":[1,2]},{"url":"http://x/f"}]},
				"configuration":{"returnImmediately":true,"taskPushNotificationConfig":{"url":"http://cb","authentication":{"scheme":"Bearer","credentials":"c"}}}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user",
				"parts":[{"kind":"text","text":"hi"},{"kind":"data","data":{"a":1}},{"kind":"data","data":{"value":[1,2]}},{"kind":"file","file":{"uri":"http://x/f"}}]},
				"configuration":{"blocking":false,"pushNotificationConfig":{"url":"http://cb","authentication":{"schemes":["Bearer"],"credentials":"c"}}}}}`},
		{"v1.0 GetTask becomes tasks/get",
			`{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{"id":"t"}}`,
			`{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"id":"t"}}`},
		{"v0.3 passes as is",
			`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`},
		{"a mix: v0.3 parts kept, v1.0 ones translated, returnImmediately wins over blocking",
			`{"jsonrpc":"2.0","id":3,"method":"message/stream","params":{"message":{"messageId":"m","role":"ROLE_AGENT",
				"parts":[{"kind":"file","file":{"bytes":"AA==","name":"f"}},{"raw":"AA=="},{"data":null}]},"configuration":{"blocking":true,"returnImmediately":true}}}`,
			`{"jsonrpc":"2.0","id":3,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m","role":"agent",
				"parts":[{"kind":"file","file":{"bytes":"AA==","name":"f"}},{"kind":"file","file":{"bytes":"AA=="}},{"kind":""}]},"configuration":{"blocking":false}}}`},
		{"a v1.0 field of the wrong type is what a v0.3 reader makes of it: nothing",
			`{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER"},"configuration":{"returnImmediately":"yes","taskPushNotificationConfig":5}}}`,
			`{"jsonrpc":"2.0","id":4,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user"},"configuration":{}}}`},
		{"params that are not an object are a2asrv's to refuse",
			`{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":[1]}`,
			`{"jsonrpc":"2.0","id":5,"method":"message/send","params":[1]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := requestV03([]byte(c.in))
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(got))
		})
	}
	got, err := requestV03([]byte("not json"))
	require.NoError(t, err)
	require.Equal(t, "not json", string(got), "what is not JSON is left to the JSON-RPC parser")
	_, err = requestV03([]byte(`{"jsonrpc":"2.0","id":6,"method":"SendMessage","params":{"message":{"messageId":"m","role":5}}}`))
	require.Error(t, err, "a message's params that read as neither version")
	_, err = requestV03([]byte(`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m","parts":[]},
		"configuration":{"taskPushNotificationConfig":{"url":5}}}}`))
	require.Error(t, err, "a push config that cannot be read is refused, not dropped")
}

func TestAnswerV1(t *testing.T) {
	t.Parallel()
	v03 := `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required",
		"message":{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"which?"}]}},
		"artifacts":[{"artifactId":"a","parts":[{"kind":"data","data":{"state":"kept as data"}}]}]}}`
	require.JSONEq(t, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_INPUT_REQUIRED",
		"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"which?"}]}},
		"artifacts":[{"artifactId":"a","parts":[{"data":{"state":"kept as data"}}]}]}}}`,
		string(answerV1("message/send", []byte(v03))))
	errBody := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"task not found","data":{"error":"task not found: job x"}}}`
	require.Equal(t, `{"error":{"code":-32001,"message":"task not found: job x","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",`+
		`"domain":"a2a-protocol.org","reason":"TASK_NOT_FOUND"}]},"id":1,"jsonrpc":"2.0"}`,
		string(answerV1("tasks/get", []byte(errBody))), "an error's text is its message, its details a list")
	list := `{"jsonrpc":"2.0","id":1,"result":[{"pushNotificationConfig":{"id":"c","url":"http://x","authentication":{"schemes":["Basic"]}},"taskId":"t"}]}` + "\n"
	require.Equal(t, `{"id":1,"jsonrpc":"2.0","result":{"configs":[{"authentication":{"scheme":"Basic"},"id":"c","taskId":"t","url":"http://x"}],"nextPageToken":""}}`,
		string(answerV1("tasks/pushNotificationConfig/list", []byte(list))), "a list is a ListTaskPushNotificationConfigsResponse of flat configs")
	none := `{"jsonrpc":"2.0","id":1,"result":[]}`
	require.Equal(t, `{"id":1,"jsonrpc":"2.0","result":{"configs":[],"nextPageToken":""}}`, string(answerV1("tasks/pushNotificationConfig/list", []byte(none))))
}

func TestRequestVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ header, query, method, want string }{
		{"", "", "SendMessage", VersionV1},
		{"", "", "message/send", VersionV03},
		{"1.0", "", "message/send", VersionV1},
		{"1", "", "tasks/get", VersionV1},
		{" 1.1 ", "", "GetTask", VersionV1},
		{"0.3", "", "GetTask", VersionV03},
		{"0.3.0", "", "SendMessage", VersionV03},
		{"", "1.0", "message/send", VersionV1},
		{"0.3", "1.0", "SendMessage", VersionV03},
		{"2.0", "", "SendMessage", ""},
		{"0.2", "", "message/send", ""},
		{"abc", "", "GetTask", ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "/a2a/default?A2A-Version="+c.query, nil)
		if c.header != "" {
			r.Header.Set("A2A-Version", c.header)
		}
		got, err := requestVersion(r, c.method)
		if c.want == "" {
			require.ErrorIs(t, err, errVersion, "%+v", c)
			continue
		}
		require.NoError(t, err, "%+v", c)
		require.Equal(t, c.want, got, "%+v", c)
	}
}

func TestPushConfigParams(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"v1.0 flat create",
			`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"tenant":"default","taskId":"t","id":"c",
				"url":"http://cb","token":"tok","authentication":{"scheme":"Bearer","credentials":"s"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"t","pushNotificationConfig":{"id":"c",
				"url":"http://cb","token":"tok","authentication":{"schemes":["Bearer"],"credentials":"s"}}}}`},
		{"v0.3 nested set",
			`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"t","pushNotificationConfig":{"url":"http://cb",
				"authentication":{"schemes":["Basic","Bearer"],"credentials":"s"}}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"t","pushNotificationConfig":{"url":"http://cb",
				"authentication":{"schemes":["Basic"],"credentials":"s"}}}}`},
		{"v1.0 get by task and config id",
			`{"jsonrpc":"2.0","id":3,"method":"GetTaskPushNotificationConfig","params":{"tenant":"default","taskId":"t","id":"c"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tasks/pushNotificationConfig/get","params":{"id":"t","pushNotificationConfigId":"c"}}`},
		{"v1.0 list by task id",
			`{"jsonrpc":"2.0","id":4,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"t","pageSize":10}}`,
			`{"jsonrpc":"2.0","id":4,"method":"tasks/pushNotificationConfig/list","params":{"id":"t"}}`},
		{"v1.0 delete",
			`{"jsonrpc":"2.0","id":5,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"t","id":"c"}}`,
			`{"jsonrpc":"2.0","id":5,"method":"tasks/pushNotificationConfig/delete","params":{"id":"t","pushNotificationConfigId":"c"}}`},
		{"v0.3 get as it is",
			`{"jsonrpc":"2.0","id":6,"method":"tasks/pushNotificationConfig/get","params":{"id":"t","pushNotificationConfigId":"c"}}`,
			`{"jsonrpc":"2.0","id":6,"method":"tasks/pushNotificationConfig/get","params":{"id":"t","pushNotificationConfigId":"c"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := requestV03([]byte(c.in))
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(got))
		})
	}
	_, err := requestV03([]byte(`{"jsonrpc":"2.0","id":7,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","url":5}}`))
	require.Error(t, err, "a push config that reads as neither version is refused")
}

func TestStreamV1(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	s := newStreamV1(w)
	event := func(id, data string) {
		// As a2asrv writes an event: two writes, then a flush.
		_, err := s.Write([]byte("id: " + id + "\n"))
		require.NoError(t, err)
		_, err = s.Write([]byte("data: " + data + "\n\n"))
		require.NoError(t, err)
		s.Flush()
	}
	event("e1", `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}}`)
	event("e2", `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},`+
		`"artifacts":[{"artifactId":"result","parts":[{"kind":"text","text":"done"}]}]}}`)
	event("e3", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error"}}`)
	require.True(t, w.Flushed)
	require.Equal(t, "id: e1\n"+`data: {"id":1,"jsonrpc":"2.0","result":{"task":{"contextId":"c","id":"t","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n"+
		"id: e2\n"+`data: {"id":1,"jsonrpc":"2.0","result":{"artifactUpdate":{"artifact":{"artifactId":"result","parts":[{"text":"done"}]},`+
		`"contextId":"c","lastChunk":true,"taskId":"t"}}}`+"\n\n"+
		"id: e2.1\n"+`data: {"id":1,"jsonrpc":"2.0","result":{"statusUpdate":{"contextId":"c","status":{"state":"TASK_STATE_COMPLETED"},"taskId":"t"}}}`+"\n\n"+
		"id: e3\n"+`data: {"error":{"code":-32603,"message":"internal error","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",`+
		`"domain":"a2a-protocol.org","reason":"INTERNAL_ERROR"}]},"id":1,"jsonrpc":"2.0"}`+"\n\n", w.Body.String())
}

// The answers to v1.0 callers are byte for byte what Agent-Reach wrote when
// it rewrote a2asrv's answers as maps (whose keys encoding/json sorts).
func TestAnswerV1Bytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ method, in, want string }{
		{"GetTask",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"0190f1c2-0000-7000-8000-000000000001","artifacts":[{"artifactId":"result","name":"result",` +
				`"parts":[{"kind":"data","data":{"by":"calc","sum":3}}]}],"contextId":"0190f1c2-0000-7000-8000-000000000001","metadata":{"agent_id":"calc",` +
				`"attempts":1,"capability":"calc.add","reach_status":"SUCCESS","trace_id":"tr"},"status":{"state":"completed","timestamp":"2026-11-29T23:00:00Z"}}}` + "\n",
			`{"id":1,"jsonrpc":"2.0","result":{"artifacts":[{"artifactId":"result","name":"result","parts":[{"data":{"by":"calc","sum":3}}]}],` +
				`"contextId":"0190f1c2-0000-7000-8000-000000000001","id":"0190f1c2-0000-7000-8000-000000000001","metadata":{"agent_id":"calc","attempts":1,` +
				`"capability":"calc.add","reach_status":"SUCCESS","trace_id":"tr"},"status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-11-29T23:00:00Z"}}}`},
		{"SendMessage",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"0190f1c2-0000-7000-8000-000000000002","contextId":"0190f1c2-0000-7000-8000-000000000002",` +
				`"metadata":{"agent_id":"calc","attempts":3,"capability":"calc.add","reach_status":"DEAD_LETTER","trace_id":"tr"},"status":{"message":{"kind":"message",` +
				`"messageId":"0190f1c2-0000-7000-8000-000000000002.status","contextId":"0190f1c2-0000-7000-8000-000000000002","parts":[{"kind":"text",` +
				`"text":"no answer by the deadline"}],"role":"agent","taskId":"0190f1c2-0000-7000-8000-000000000002"},"state":"failed","timestamp":"2026-11-29T23:00:00Z"}}}` + "\n",
			`{"id":1,"jsonrpc":"2.0","result":{"task":{"contextId":"0190f1c2-0000-7000-8000-000000000002","id":"0190f1c2-0000-7000-8000-000000000002",` +
				`"metadata":{"agent_id":"calc","attempts":3,"capability":"calc.add","reach_status":"DEAD_LETTER","trace_id":"tr"},"status":{"message":{` +
				`"contextId":"0190f1c2-0000-7000-8000-000000000002","messageId":"0190f1c2-0000-7000-8000-000000000002.status","parts":[{"text":"no answer by the deadline"}],` +
				`"role":"ROLE_AGENT","taskId":"0190f1c2-0000-7000-8000-000000000002"},"state":"TASK_STATE_FAILED","timestamp":"2026-11-29T23:00:00Z"}}}}`},
		{"GetTaskPushNotificationConfig",
			`{"jsonrpc":"2.0","id":"x","result":{"pushNotificationConfig":{"id":"cfg","authentication":{"schemes":["Bearer"]},"token":"tok",` +
				`"url":"http://127.0.0.1:9/cb"},"taskId":"t"}}` + "\n",
			`{"id":"x","jsonrpc":"2.0","result":{"authentication":{"scheme":"Bearer"},"id":"cfg","taskId":"t","token":"tok",` +
				`"url":"http://127.0.0.1:9/cb"}}`},
	} {
		require.Equal(t, c.want, string(answerV1(a2a.MethodsV1[c.method], []byte(c.in))), c.method)
	}
}
