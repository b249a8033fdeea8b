package server

import (
	"encoding/json"
	"fmt"

	"github.com/agentreach/agentreach/a2a"
	"github.com/agentreach/agentreach/domain"
)

// request is a JSON-RPC request as a2asrv reads it; what it does not read
// is refused before (check).
type request struct {
	ID      json.RawMessage `json:"id,omitempty"`
	JSONRPC json.RawMessage `json:"jsonrpc,omitempty"`
	Method  json.RawMessage `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// response is a JSON-RPC answer with a result.
type response struct {
	ID      json.RawMessage `json:"id"`
	JSONRPC json.RawMessage `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
}

// refusal is a JSON-RPC error answer of the server's own.
type refusal struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	ID      json.RawMessage `json:"id"`
	JSONRPC string          `json:"jsonrpc"`
}

// The members a JSON-RPC request may have, and those of the params of the
// methods whose params are not A2A's push-config shapes (which differ
// between versions and are read leniently).
var (
	rpcMembers = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true}
	sendParams = map[string]bool{"message": true, "configuration": true, "metadata": true, "tenant": true}
	taskParams = map[string]bool{"id": true, "historyLength": true, "metadata": true, "tenant": true}
	rpcParams  = map[string]map[string]bool{
		"message/send": sendParams, "SendMessage": sendParams, "message/stream": sendParams, "SendStreamingMessage": sendParams,
		"tasks/get": taskParams, "GetTask": taskParams, "tasks/cancel": taskParams, "CancelTask": taskParams,
		"tasks/resubscribe": taskParams, "SubscribeToTask": taskParams,
	}
)

// refuse is a refusal with code and message, to the request with id.
func refuse(id json.RawMessage, code int, msg string) []byte {
	var r refusal
	r.Error.Code, r.Error.Message, r.ID, r.JSONRPC = code, msg, id, "2.0"
	out, _ := json.Marshal(r)
	return out
}

// check refuses, as REST refuses a body, a request that is not one JSON
// value (trailing data: -32700), has members JSON-RPC or the method does
// not define (-32600, -32602), or holds text PostgreSQL cannot store
// (-32602). It answers the refusal to send, nil if the request passes.
func (s *Server) check(body []byte) []byte {
	id, code, msg := s.checkRequest(body)
	if code == 0 {
		return nil
	}
	return refuse(id, code, msg)
}

func (s *Server) checkRequest(body []byte) (json.RawMessage, int, string) {
	if !json.Valid(body) {
		return nil, -32700, "parse error: the body must be exactly one JSON object"
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return nil, -32600, "invalid request: the body must be a JSON object"
	}
	id := req["id"]
	for k := range req {
		if !rpcMembers[k] {
			return id, -32600, fmt.Sprintf("invalid request: unknown member %q", k)
		}
	}
	var method string
	_ = json.Unmarshal(req["method"], &method)
	if known, ok := rpcParams[method]; ok && len(req["params"]) > 0 {
		var params map[string]json.RawMessage
		if json.Unmarshal(req["params"], &params) == nil {
			for k := range params {
				if !known[k] {
					return id, -32602, fmt.Sprintf("invalid params: unknown member params.%s", k)
				}
			}
		}
	}
	if at, bad := domain.UnstorableJSON(body); bad {
		return id, -32602, "invalid params: " + s.cfg.Unstorable(at)
	}
	return id, 0, ""
}

// requestV03 is a request as a2asrv takes it: a v1.0 method name as its
// v0.3 name, a message's params in v0.3's shape (a2a.ReadSendParams), a
// push config's params too (a2a.ReadTaskPushConfig, a2a.ReadPushConfigRef):
// whichever version's shape they come in, as callers mix them. Params of a
// message or a push config that read as neither version are an error;
// anything else a2asrv cannot read is passed on, for a2asrv to refuse.
func requestV03(body []byte) ([]byte, error) {
	var req request
	if json.Unmarshal(body, &req) != nil {
		return body, nil
	}
	var method string
	if json.Unmarshal(req.Method, &method) == nil {
		if v03, ok := a2a.MethodsV1[method]; ok {
			method = v03
			req.Method, _ = json.Marshal(v03)
		}
	}
	if !isObject(req.Params) {
		return json.Marshal(req)
	}
	var params any
	var err error
	switch method {
	case "message/send", "message/stream":
		params, err = a2a.ReadSendParams(req.Params)
	case "tasks/pushNotificationConfig/set":
		params, err = a2a.ReadTaskPushConfig(req.Params)
	case "tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete":
		params, err = a2a.ReadPushConfigRef(req.Params)
	default:
		return json.Marshal(req)
	}
	if err != nil {
		return nil, err
	}
	req.Params, _ = json.Marshal(params)
	return json.Marshal(req)
}

// errorResponse is a JSON-RPC error answer as a2asrv writes it: the
// error's text in data.error, beside the code's standard message.
type errorResponse struct {
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error"`
	ID      json.RawMessage `json:"id"`
	JSONRPC json.RawMessage `json:"jsonrpc"`
}

// errorInfo is v1.0's error detail, a google.rpc.ErrorInfo.
type errorInfo struct {
	Type   string `json:"@type"`
	Domain string `json:"domain"`
	Reason string `json:"reason"`
}

// errorReasons are v1.0's ErrorInfo reasons of the A2A and JSON-RPC codes.
var errorReasons = map[int]string{
	-32001: "TASK_NOT_FOUND", -32002: "TASK_NOT_CANCELABLE", -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
	-32004: "UNSUPPORTED_OPERATION", -32005: "CONTENT_TYPE_NOT_SUPPORTED", -32006: "INVALID_AGENT_RESPONSE",
	-32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32008: "EXTENSION_SUPPORT_REQUIRED", -32009: "VERSION_NOT_SUPPORTED",
	-32700: "PARSE_ERROR", -32600: "INVALID_REQUEST", -32601: "METHOD_NOT_FOUND", -32602: "INVALID_PARAMS", -32603: "INTERNAL_ERROR",
}

// errorV1 is a JSON-RPC error answer as v1.0 spells it: the whole text in
// message (a2asrv puts it in data.error, which v1.0 clients do not read),
// and data a list of details, here a google.rpc.ErrorInfo with the
// error's reason. Anything else passes as it is.
func errorV1(body []byte) []byte {
	var e errorResponse
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return body
	}
	var data struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(e.Error.Data, &data) == nil && data.Error != "" {
		e.Error.Message = data.Error
	}
	e.Error.Data = nil
	if reason, ok := errorReasons[e.Error.Code]; ok {
		e.Error.Data, _ = json.Marshal([]errorInfo{{Type: "type.googleapis.com/google.rpc.ErrorInfo", Domain: "a2a-protocol.org", Reason: reason}})
	}
	out, err := json.Marshal(e)
	if err != nil {
		return body
	}
	return out
}

// answerV1 is a2asrv's v0.3 answer to method (its v0.3 name), in v1.0's
// shapes: SendMessage's result a SendMessageResponse ({"task": …} or
// {"message": …}), tasks without kinds and with TASK_STATE_* and ROLE_*
// names, push configs flat (ListTaskPushNotificationConfigs' in a
// {"configs": […]} response), errors with their text as the message.
// What cannot be read as the method's result passes as it is.
func answerV1(method string, body []byte) []byte {
	var resp response
	if json.Unmarshal(body, &resp) != nil {
		return body
	}
	if resp.Result == nil {
		return errorV1(body)
	}
	result, err := resultV1(method, resp.Result)
	if err != nil {
		return body
	}
	resp.Result = result
	out, err := json.Marshal(resp)
	if err != nil {
		return body
	}
	return out
}

func resultV1(method string, raw json.RawMessage) ([]byte, error) {
	switch method {
	case "message/send":
		var kind struct {
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(raw, &kind)
		if kind.Kind == "message" {
			var m a2a.MessageV03
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, err
			}
			v1 := m.V1()
			return json.Marshal(a2a.SendResultV1{Message: &v1})
		}
		t, err := taskV1(raw)
		if err != nil {
			return nil, err
		}
		return json.Marshal(a2a.SendResultV1{Task: &t})
	case "tasks/get", "tasks/cancel":
		t, err := taskV1(raw)
		if err != nil {
			return nil, err
		}
		return json.Marshal(t)
	case "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get":
		var p a2a.TaskPushConfigV03
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		return json.Marshal(p.V1())
	case "tasks/pushNotificationConfig/list":
		var ps []a2a.TaskPushConfigV03
		if err := json.Unmarshal(raw, &ps); err != nil {
			return nil, err
		}
		list := a2a.ListPushConfigsV1{Configs: make([]a2a.PushConfigV1, 0, len(ps))}
		for _, p := range ps {
			list.Configs = append(list.Configs, p.V1())
		}
		return json.Marshal(list)
	case "agent/getAuthenticatedExtendedCard":
		return reencode[a2a.Card](raw)
	}
	return raw, nil
}

func taskV1(raw json.RawMessage) (a2a.TaskV1, error) {
	var t a2a.TaskV03
	if err := json.Unmarshal(raw, &t); err != nil {
		return a2a.TaskV1{}, err
	}
	return t.V1(), nil
}

// reencode writes raw again as a T writes it (its fields in order).
func reencode[T any](raw json.RawMessage) ([]byte, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func isObject(raw json.RawMessage) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}
