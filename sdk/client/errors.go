package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Error kinds. An *APIError unwraps to the kind of its code, so
// errors.Is(err, ErrNotFound) works on any error this package returns.
var (
	ErrInvalidArgument  = errors.New("invalid argument")
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrPermissionDenied = errors.New("permission denied")
	ErrNotFound         = errors.New("not found")
	ErrConflict         = errors.New("conflict")
	ErrRateLimited      = errors.New("rate limited")
	ErrUnavailable      = errors.New("unavailable")

	// ErrUnreachable: no answer from Agent-Reach at all (connection refused
	// or reset, a timeout, a name that does not resolve). Lookups served
	// from a stale list answer no error; everything else wraps this.
	ErrUnreachable = errors.New("Agent-Reach unreachable")

	// ErrNoCandidates: Invoke found no candidate, or none of them took the
	// invocation; InvokeResult.Attempts says what each one did.
	ErrNoCandidates = errors.New("no candidate took the invocation")

	// ErrBadSignature: a callback whose Standard Webhooks signature is
	// missing, malformed, made with another secret, or too old.
	ErrBadSignature = errors.New("bad callback signature")

	// ErrAmbiguousIntent: no resolver was confident of any capability for
	// the intent (422 ambiguous_intent); the APIError's message names the
	// suggestions.
	ErrAmbiguousIntent = errors.New("ambiguous intent")

	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
)

// kindOfCode maps the API's stable error codes (docs/api.md) to the kinds
// above; a code not listed has no kind.
var kindOfCode = map[string]error{
	"invalid_argument":  ErrInvalidArgument,
	"unauthenticated":   ErrUnauthenticated,
	"permission_denied": ErrPermissionDenied,
	"not_found":         ErrNotFound,
	"conflict":          ErrConflict,
	"rate_limited":      ErrRateLimited,
	"overloaded":        ErrRateLimited,
	"unavailable":       ErrUnavailable,
	"ambiguous_intent":  ErrAmbiguousIntent,
}

// APIError is an error answer of Agent-Reach: its HTTP status and the body
// {"error": {"code", "message", "field"}}. An answer that is not such a
// body has the code "http_error" and the body as its message.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Field names the request field at fault, as the caller wrote it
	// (payload.k, reports[3].agent_id), when there is one.
	Field string
	// RetryAfter is the answer's Retry-After (429, 503), zero without one.
	RetryAfter time.Duration
}

// Error reads "code (HTTP status): message [field f]".
func (e *APIError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
	if e.Field != "" {
		msg += " [field " + e.Field + "]"
	}
	return msg
}

// Unwrap answers the error's kind (ErrNotFound, ...), or nil.
func (e *APIError) Unwrap() error {
	if k, ok := kindOfCode[e.Code]; ok {
		return k
	}
	switch e.Status {
	case 401:
		return ErrUnauthenticated
	case 403:
		return ErrPermissionDenied
	case 404:
		return ErrNotFound
	case 429:
		return ErrRateLimited
	case 503:
		return ErrUnavailable
	}
	return nil
}

// answerError reads an error answer's body.
func answerError(status int, b []byte, retryAfter time.Duration) *APIError {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &body)
	e := &APIError{Status: status, Code: body.Error.Code, Message: body.Error.Message, Field: body.Error.Field, RetryAfter: retryAfter}
	if e.Code == "" {
		e.Code, e.Message = "http_error", strings.TrimSpace(string(b))
	}
	return e
}

// unreachable reports whether err means Agent-Reach did not answer, or
// answered that it cannot serve now (502, 503, 504): what makes a lookup
// fall back to its last known list.
func unreachable(err error) bool {
	if errors.Is(err, ErrUnreachable) {
		return true
	}
	var apiErr *APIError
	return errors.As(err, &apiErr) && (apiErr.Status == 502 || apiErr.Status == 503 || apiErr.Status == 504)
}
