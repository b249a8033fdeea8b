package a2a

import "encoding/json"

// Messages, parts and the params of SendMessage (message/send), in v0.3's
// shapes (…V03) and v1.0's (…V1). Values that belong to the sender (data,
// metadata) are kept as the JSON they are.

// PartV03 is a v0.3 part: its kind says which of text, data or file it
// holds. v0.3's data is always an object.
type PartV03 struct {
	Data     json.RawMessage `json:"data,omitempty"`
	File     *FileV03        `json:"file,omitempty"`
	Kind     string          `json:"kind"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Text     *string         `json:"text,omitempty"`
}

// FileV03 is the file of a v0.3 file part: its bytes (base64) or its URI.
type FileV03 struct {
	Bytes    string `json:"bytes,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
	Name     string `json:"name,omitempty"`
	URI      string `json:"uri,omitempty"`
}

// MessageV03 is a v0.3 message (kind "message", role "user" or "agent").
// Parts a message lacks stay lacking (omitzero), as readers tell them from
// an empty list.
type MessageV03 struct {
	ContextID        string          `json:"contextId,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	Kind             string          `json:"kind"`
	MessageID        string          `json:"messageId"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Parts            []PartV03       `json:"parts,omitzero"`
	ReferenceTaskIDs []string        `json:"referenceTaskIds,omitempty"`
	Role             string          `json:"role"`
	TaskID           string          `json:"taskId,omitempty"`
}

// SendParamsV03 are the params of message/send and message/stream.
type SendParamsV03 struct {
	Configuration *SendConfigV03  `json:"configuration,omitempty"`
	Message       *MessageV03     `json:"message,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// SendConfigV03 is how a v0.3 caller wants its message handled: blocking
// until the task ends or not, and where to push its updates.
type SendConfigV03 struct {
	AcceptedOutputModes    []string       `json:"acceptedOutputModes,omitempty"`
	Blocking               *bool          `json:"blocking,omitempty"`
	HistoryLength          *int           `json:"historyLength,omitempty"`
	PushNotificationConfig *PushConfigV03 `json:"pushNotificationConfig,omitempty"`
}

// PushConfigV03 is where a task's updates are pushed, with what to present.
type PushConfigV03 struct {
	Authentication *PushAuthV03 `json:"authentication,omitempty"`
	ID             string       `json:"id,omitempty"`
	Token          string       `json:"token,omitempty"`
	URL            string       `json:"url"`
}

// PushAuthV03 are the credentials of a push, for any of its schemes.
type PushAuthV03 struct {
	Credentials string   `json:"credentials,omitempty"`
	Schemes     []string `json:"schemes"`
}

// TaskPushConfigV03 is a push config of a task, as the
// tasks/pushNotificationConfig methods answer it.
type TaskPushConfigV03 struct {
	PushNotificationConfig PushConfigV03 `json:"pushNotificationConfig"`
	TaskID                 string        `json:"taskId"`
}

// PartV1 is a v1.0 part: no kind; the field it holds says what it is.
// Its data may be any JSON value.
type PartV1 struct {
	Data      json.RawMessage `json:"data,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	Text      *string         `json:"text,omitempty"`
	URL       *string         `json:"url,omitempty"`
}

// MessageV1 is a v1.0 message (role ROLE_USER or ROLE_AGENT).
type MessageV1 struct {
	ContextID        string          `json:"contextId,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	MessageID        string          `json:"messageId"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Parts            []PartV1        `json:"parts,omitzero"`
	ReferenceTaskIDs []string        `json:"referenceTaskIds,omitempty"`
	Role             string          `json:"role"`
	TaskID           string          `json:"taskId,omitempty"`
}

// SendParamsV1 are the params of SendMessage and SendStreamingMessage.
type SendParamsV1 struct {
	Configuration *SendConfigV1   `json:"configuration,omitempty"`
	Message       *MessageV1      `json:"message,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// SendConfigV1 is v1.0's SendMessageConfiguration: returnImmediately is
// v0.3's blocking turned around.
type SendConfigV1 struct {
	AcceptedOutputModes        []string      `json:"acceptedOutputModes,omitempty"`
	HistoryLength              *int          `json:"historyLength,omitempty"`
	ReturnImmediately          *bool         `json:"returnImmediately,omitempty"`
	TaskPushNotificationConfig *PushConfigV1 `json:"taskPushNotificationConfig,omitempty"`
}

// PushConfigV1 is v1.0's TaskPushNotificationConfig: flat (the task's
// id beside the url), one scheme, not a list. It is both what a
// SendMessageConfiguration carries and what the push-config methods take
// and answer.
type PushConfigV1 struct {
	Authentication *PushAuthV1 `json:"authentication,omitempty"`
	ID             string      `json:"id,omitempty"`
	TaskID         string      `json:"taskId,omitempty"`
	Tenant         string      `json:"tenant,omitempty"`
	Token          string      `json:"token,omitempty"`
	URL            string      `json:"url"`
}

// ListPushConfigsV1 is v1.0's ListTaskPushNotificationConfigsResponse.
type ListPushConfigsV1 struct {
	Configs       []PushConfigV1 `json:"configs"`
	NextPageToken string         `json:"nextPageToken"`
}

// PushConfigRefV03 are the params of v0.3's tasks/pushNotificationConfig
// get, list and delete: the task's id, and the config's.
type PushConfigRefV03 struct {
	ID                       string `json:"id"`
	PushNotificationConfigID string `json:"pushNotificationConfigId,omitempty"`
}

// PushAuthV1 are the credentials of a v1.0 push and their scheme.
type PushAuthV1 struct {
	Credentials string `json:"credentials,omitempty"`
	Scheme      string `json:"scheme"`
}
