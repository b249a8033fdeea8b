package a2a

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The one translation between the versions. Requests go from v1.0 to
// v0.3 (V03 methods), since both Agent-Reach's A2A server (a2a-go's
// a2asrv) and its fallback for older agents speak v0.3; answers go from
// v0.3 to v1.0 (V1 methods), for v1.0 callers. Method names, states and
// roles are renamed; kinds are dropped or told from the field a part
// holds; everything else carries over as it is.

// MethodsV1 maps each v1.0 method name to its v0.3 name.
var MethodsV1 = map[string]string{
	"SendMessage":                      "message/send",
	"SendStreamingMessage":             "message/stream",
	"GetTask":                          "tasks/get",
	"CancelTask":                       "tasks/cancel",
	"SubscribeToTask":                  "tasks/resubscribe",
	"CreateTaskPushNotificationConfig": "tasks/pushNotificationConfig/set",
	"SetTaskPushNotificationConfig":    "tasks/pushNotificationConfig/set",
	"GetTaskPushNotificationConfig":    "tasks/pushNotificationConfig/get",
	"ListTaskPushNotificationConfig":   "tasks/pushNotificationConfig/list",
	"ListTaskPushNotificationConfigs":  "tasks/pushNotificationConfig/list",
	"DeleteTaskPushNotificationConfig": "tasks/pushNotificationConfig/delete",
	"GetExtendedAgentCard":             "agent/getAuthenticatedExtendedCard",
}

// Roles of a message, in v0.3's and v1.0's spelling.
const (
	RoleUser    = "user"
	RoleAgent   = "agent"
	RoleUserV1  = "ROLE_USER"
	RoleAgentV1 = "ROLE_AGENT"
)

// StateV1 is v1.0's name of a v0.3 state: TASK_STATE_INPUT_REQUIRED for
// input-required.
func StateV1(s string) string {
	if s == "" {
		return ""
	}
	return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

func roleV1(r string) string {
	if r == "" {
		return ""
	}
	return "ROLE_" + strings.ToUpper(r)
}

func roleV03(r string) string {
	switch r {
	case RoleUserV1:
		return RoleUser
	case RoleAgentV1:
		return RoleAgent
	}
	return r
}

// V03 is the part in v0.3's shape, its kind told by what it holds (text,
// data, url or raw, in that order): data that is not an object becomes
// {"value": data}, as v0.3's data parts are objects; a url or raw bytes
// become a file. A part holding none of them (or data null) has no kind,
// and is refused by whoever reads it. v1.0's mediaType and filename are not carried:
// Agent-Reach never passed them on.
func (p PartV1) V03() PartV03 {
	out := PartV03{Metadata: p.Metadata}
	switch {
	case p.Text != nil:
		out.Kind, out.Text = "text", p.Text
	case len(p.Data) > 0 && string(p.Data) != "null":
		out.Kind, out.Data = "data", objectOrValue(p.Data)
	case p.URL != nil:
		out.Kind, out.File = "file", &FileV03{URI: *p.URL}
	case p.Raw != nil:
		out.Kind, out.File = "file", &FileV03{Bytes: *p.Raw}
	}
	return out
}

// objectOrValue is v as v0.3 data: v if it is an object, else {"value": v}.
func objectOrValue(v json.RawMessage) json.RawMessage {
	if isObject(v) {
		return v
	}
	b, _ := json.Marshal(struct {
		Value json.RawMessage `json:"value"`
	}{v})
	return b
}

// V03 is the message in v0.3's shape.
func (m MessageV1) V03() MessageV03 {
	out := MessageV03{ContextID: m.ContextID, Extensions: m.Extensions, Kind: "message", MessageID: m.MessageID,
		Metadata: m.Metadata, ReferenceTaskIDs: m.ReferenceTaskIDs, Role: roleV03(m.Role), TaskID: m.TaskID}
	if m.Parts != nil {
		out.Parts = make([]PartV03, len(m.Parts))
		for i, p := range m.Parts {
			out.Parts[i] = p.V03()
		}
	}
	return out
}

// V03 is the push config in v0.3's shape: its scheme as a list of one.
func (p PushConfigV1) V03() PushConfigV03 {
	out := PushConfigV03{ID: p.ID, Token: p.Token, URL: p.URL}
	if a := p.Authentication; a != nil {
		out.Authentication = &PushAuthV03{Credentials: a.Credentials}
		if a.Scheme != "" {
			out.Authentication.Schemes = []string{a.Scheme}
		}
	}
	return out
}

// V03 is the configuration in v0.3's shape: returnImmediately becomes
// blocking's opposite.
func (c SendConfigV1) V03() SendConfigV03 {
	out := SendConfigV03{AcceptedOutputModes: c.AcceptedOutputModes, HistoryLength: c.HistoryLength}
	if c.ReturnImmediately != nil {
		blocking := !*c.ReturnImmediately
		out.Blocking = &blocking
	}
	if c.TaskPushNotificationConfig != nil {
		p := c.TaskPushNotificationConfig.V03()
		out.PushNotificationConfig = &p
	}
	return out
}

// V03 are the params in v0.3's shape.
func (p SendParamsV1) V03() SendParamsV03 {
	out := SendParamsV03{Metadata: p.Metadata}
	if p.Configuration != nil {
		c := p.Configuration.V03()
		out.Configuration = &c
	}
	if p.Message != nil {
		m := p.Message.V03()
		out.Message = &m
	}
	return out
}

// ReadSendParams reads the params of a message/send or SendMessage as
// callers send them: v0.3's shape, v1.0's, or any mix of the two. It reads
// them as v0.3, and takes from v1.0 what v0.3 spells otherwise: a part
// without a kind, a ROLE_* role, a boolean returnImmediately and an object
// taskPushNotificationConfig (v0.3 readers ignore these two otherwise).
// What reads as neither version is an error.
func ReadSendParams(raw []byte) (SendParamsV03, error) {
	var p SendParamsV03
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, err
	}
	var v1 struct {
		Configuration *struct {
			ReturnImmediately          json.RawMessage `json:"returnImmediately"`
			TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig"`
		} `json:"configuration"`
		Message *struct {
			Parts []json.RawMessage `json:"parts"`
		} `json:"message"`
	}
	if err := json.Unmarshal(raw, &v1); err != nil {
		return p, err
	}
	if m := p.Message; m != nil {
		m.Kind, m.Role = "message", roleV03(m.Role)
		for i := range m.Parts {
			if m.Parts[i].Kind != "" {
				continue
			}
			var part PartV1
			if err := json.Unmarshal(v1.Message.Parts[i], &part); err != nil {
				return p, err
			}
			m.Parts[i] = part.V03()
		}
	}
	if c := v1.Configuration; c != nil {
		var v1c SendConfigV1
		var ri any
		if _ = json.Unmarshal(c.ReturnImmediately, &ri); ri != nil {
			if b, ok := ri.(bool); ok {
				v1c.ReturnImmediately = &b
			}
		}
		if isObject(c.TaskPushNotificationConfig) {
			v1c.TaskPushNotificationConfig = &PushConfigV1{}
			if err := json.Unmarshal(c.TaskPushNotificationConfig, v1c.TaskPushNotificationConfig); err != nil {
				return p, err
			}
		}
		t := v1c.V03()
		if p.Configuration == nil {
			p.Configuration = &SendConfigV03{}
		}
		if t.Blocking != nil {
			p.Configuration.Blocking = t.Blocking
		}
		if t.PushNotificationConfig != nil {
			p.Configuration.PushNotificationConfig = t.PushNotificationConfig
		}
	}
	return p, nil
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// V1 is the part in v1.0's shape: its kind dropped, a file as a url or
// raw bytes.
func (p PartV03) V1() PartV1 {
	out := PartV1{Metadata: p.Metadata}
	switch p.Kind {
	case "text":
		out.Text = p.Text
		if out.Text == nil {
			out.Text = new(string)
		}
	case "data":
		out.Data = p.Data
	case "file":
		if f := p.File; f != nil {
			out.MediaType, out.Filename = f.MimeType, f.Name
			if f.URI != "" {
				out.URL = &f.URI
			} else {
				out.Raw = &f.Bytes
			}
		}
	}
	return out
}

// V1 is the message in v1.0's shape.
func (m MessageV03) V1() MessageV1 {
	out := MessageV1{ContextID: m.ContextID, Extensions: m.Extensions, MessageID: m.MessageID, Metadata: m.Metadata,
		ReferenceTaskIDs: m.ReferenceTaskIDs, Role: roleV1(m.Role), TaskID: m.TaskID}
	if m.Parts != nil {
		out.Parts = make([]PartV1, len(m.Parts))
		for i, p := range m.Parts {
			out.Parts[i] = p.V1()
		}
	}
	return out
}

// V1 is the task in v1.0's shape.
func (t TaskV03) V1() TaskV1 {
	out := TaskV1{ContextID: t.ContextID, ID: t.ID, Metadata: t.Metadata, Status: t.Status.V1()}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, a.V1())
	}
	for _, m := range t.History {
		out.History = append(out.History, m.V1())
	}
	return out
}

// V1 is the status in v1.0's shape.
func (s TaskStatusV03) V1() TaskStatusV1 {
	out := TaskStatusV1{State: StateV1(s.State), Timestamp: s.Timestamp}
	if s.Message != nil {
		m := s.Message.V1()
		out.Message = &m
	}
	return out
}

// V1 is the artifact in v1.0's shape.
func (a ArtifactV03) V1() ArtifactV1 {
	out := ArtifactV1{ArtifactID: a.ArtifactID, Description: a.Description, Extensions: a.Extensions, Metadata: a.Metadata, Name: a.Name}
	if a.Parts != nil {
		out.Parts = make([]PartV1, len(a.Parts))
		for i, p := range a.Parts {
			out.Parts[i] = p.V1()
		}
	}
	return out
}

// StatusUpdateV1 is the task's status as a v1.0 status update: what a
// v1.0 stream sends after its first event, the task itself.
func (t TaskV03) StatusUpdateV1() StatusUpdateV1 {
	return StatusUpdateV1{ContextID: t.ContextID, Metadata: t.Metadata, Status: t.Status.V1(), TaskID: t.ID}
}

// V1 is the event in v1.0's shape: final is dropped, as a v1.0 stream
// ends when the task does.
func (e StatusUpdateV03) V1() StatusUpdateV1 {
	return StatusUpdateV1{ContextID: e.ContextID, Metadata: e.Metadata, Status: e.Status.V1(), TaskID: e.TaskID}
}

// V1 is the event in v1.0's shape.
func (e ArtifactUpdateV03) V1() ArtifactUpdateV1 {
	return ArtifactUpdateV1{Append: e.Append, Artifact: e.Artifact.V1(), ContextID: e.ContextID, LastChunk: e.LastChunk,
		Metadata: e.Metadata, TaskID: e.TaskID}
}

// V1 is the push config of task taskID in v1.0's flat shape: the first of
// its schemes (v1.0 has one).
func (p PushConfigV03) V1(taskID string) PushConfigV1 {
	out := PushConfigV1{ID: p.ID, TaskID: taskID, Token: p.Token, URL: p.URL}
	if a := p.Authentication; a != nil {
		out.Authentication = &PushAuthV1{Credentials: a.Credentials}
		if len(a.Schemes) > 0 {
			out.Authentication.Scheme = a.Schemes[0]
		}
	}
	return out
}

// V1 is the task's push config in v1.0's flat shape.
func (p TaskPushConfigV03) V1() PushConfigV1 { return p.PushNotificationConfig.V1(p.TaskID) }

// TaskV03 is the flat config as v0.3's tasks/pushNotificationConfig/set
// takes it: the task's id beside the config.
func (p PushConfigV1) TaskV03() TaskPushConfigV03 {
	return TaskPushConfigV03{PushNotificationConfig: p.V03(), TaskID: p.TaskID}
}

// ReadTaskPushConfig reads the params of a push config's creation as
// callers send them: v1.0's flat TaskPushNotificationConfig (url and token
// beside taskId) or v0.3's, whose config is nested in
// pushNotificationConfig, with its credentials' scheme in either
// version's spelling. It answers them in v0.3's shape.
func ReadTaskPushConfig(raw []byte) (TaskPushConfigV03, error) {
	var probe struct {
		Nested json.RawMessage `json:"pushNotificationConfig"`
		TaskID string          `json:"taskId"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return TaskPushConfigV03{}, err
	}
	flat := raw
	if isObject(probe.Nested) {
		flat = probe.Nested
	}
	var p struct {
		PushConfigV1
		Authentication *struct {
			Credentials string   `json:"credentials"`
			Scheme      string   `json:"scheme"`
			Schemes     []string `json:"schemes"`
		} `json:"authentication"`
	}
	if err := json.Unmarshal(flat, &p); err != nil {
		return TaskPushConfigV03{}, err
	}
	if a := p.Authentication; a != nil {
		p.PushConfigV1.Authentication = &PushAuthV1{Credentials: a.Credentials, Scheme: a.Scheme}
		if a.Scheme == "" && len(a.Schemes) > 0 {
			p.PushConfigV1.Authentication.Scheme = a.Schemes[0]
		}
	}
	p.TaskID = probe.TaskID
	return p.TaskV03(), nil
}

// ReadPushConfigRef reads the params of a push config's get, list or
// delete as callers send them: v1.0's {taskId, id} or v0.3's {id,
// pushNotificationConfigId}, where id is the task's. It answers them in
// v0.3's shape.
func ReadPushConfigRef(raw []byte) (PushConfigRefV03, error) {
	var p struct {
		PushConfigRefV03
		TaskID *string `json:"taskId"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return PushConfigRefV03{}, err
	}
	if p.TaskID == nil {
		return p.PushConfigRefV03, nil
	}
	return PushConfigRefV03{ID: *p.TaskID, PushNotificationConfigID: p.ID}, nil
}
