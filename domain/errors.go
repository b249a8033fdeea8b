package domain

import "errors"

// The error kinds. Every package's errors are one of these kinds (test with
// errors.Is), with the package's own message and the wrapping context of
// what was being done; the API maps a kind to an HTTP status and a JSON-RPC
// code in one table (httpapi), so a new error never needs a new mapping.
var (
	// ErrNotFound: no such object, or one the caller may not see.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the object's state forbids the change (an illegal
	// transition, a concurrent change, a reused key).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request itself is wrong (FieldError is of this kind).
	ErrInvalid = errors.New("invalid")
	// ErrUnauthenticated: no credential, or one that is not valid.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: a valid credential that may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: a dependency (the database, an agent) cannot serve
	// now; trying again later may work.
	ErrUnavailable = errors.New("unavailable")
)

// KindError is an error of a kind with a message of its own. What the API
// answers for it travels with it: an API code when the kind's own is too
// coarse (overloaded, not_pull), the request field at fault, and the
// message to show when the error's text, with the context wrapped around
// it, names what a caller must not see.
type KindError struct {
	Kind    error
	Message string
	// Code is the API error code when it is not the kind's (empty: the
	// kind's); the API's one table gives its HTTP status and JSON-RPC code.
	Code string
	// Field is the request field at fault, if any.
	Field string
	// Public, when set, is what the API shows instead of the error's text.
	Public string
}

// NewError returns an error of kind with message msg: errors.Is(err, kind)
// holds, and err.Error() is msg.
func NewError(kind error, msg string) error { return &KindError{Kind: kind, Message: msg} }

func (e *KindError) Error() string { return e.Message }

// Unwrap makes errors.Is see the kind.
func (e *KindError) Unwrap() error { return e.Kind }

// Unwrap makes a FieldError of the kind ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }
