package httpapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentreach/agentreach/domain"
)

// Code is a stable, machine-readable error code of the API.
type Code string

// The API's error codes (docs/api.md).
const (
	CodeInvalidArgument  Code = "invalid_argument"
	CodeUnauthenticated  Code = "unauthenticated"
	CodePermissionDenied Code = "permission_denied"
	CodeNotFound         Code = "not_found"
	CodeConflict         Code = "conflict"
	CodePayloadTooLarge  Code = "payload_too_large"
	CodeFanoutExceeded   Code = "fanout_exceeded"
	CodeRateLimited      Code = "rate_limited"
	CodeOverloaded       Code = "overloaded"
	CodeUnavailable      Code = "unavailable"
	CodeHeadersTooLarge  Code = "headers_too_large"
	CodeInternal         Code = "internal"
	// CodeNotPull: a claim or release by an agent registered in push mode.
	CodeNotPull Code = "not_pull"
	// CodeAmbiguousIntent: no resolver was confident of any capability for
	// the intent; the error carries the suggestions.
	CodeAmbiguousIntent Code = "ambiguous_intent"
	// CodeHistoryDropped: a cursor into history that retention dropped.
	CodeHistoryDropped Code = "history_dropped"
	// CodeMethodNotAllowed: a GET or DELETE of the (stateless) MCP endpoint.
	CodeMethodNotAllowed Code = "method_not_allowed"
)

// codes is the one table of the API's error codes: each one's HTTP status,
// JSON-RPC code and Retry-After, and the error kind it stands for (nil: a
// code of its own, which a KindError names, or the API's own checks).
var codes = []struct {
	code       Code
	status     int
	rpc        int
	kind       error
	retryAfter int
}{
	{CodeInvalidArgument, http.StatusBadRequest, -32602, domain.ErrInvalid, 0},
	{CodeUnauthenticated, http.StatusUnauthorized, -32600, domain.ErrUnauthenticated, 0},
	{CodePermissionDenied, http.StatusForbidden, -32600, domain.ErrForbidden, 0},
	{CodeNotFound, http.StatusNotFound, -32001, domain.ErrNotFound, 0},
	{CodeConflict, http.StatusConflict, -32600, domain.ErrConflict, 0},
	{CodeUnavailable, http.StatusServiceUnavailable, -32603, domain.ErrUnavailable, 2},
	{CodePayloadTooLarge, http.StatusRequestEntityTooLarge, -32600, nil, 0},
	{CodeFanoutExceeded, http.StatusUnprocessableEntity, -32600, nil, 0},
	{CodeRateLimited, http.StatusTooManyRequests, -32600, nil, 0},
	{CodeOverloaded, http.StatusTooManyRequests, -32600, nil, 5},
	{CodeHeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge, -32600, nil, 0},
	{CodeInternal, http.StatusInternalServerError, -32603, nil, 0},
	{CodeNotPull, http.StatusConflict, -32600, nil, 0},
	{CodeAmbiguousIntent, http.StatusUnprocessableEntity, -32600, nil, 0},
	{CodeHistoryDropped, http.StatusGone, -32001, nil, 0},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, -32600, nil, 0},
}

// statusOf is the HTTP status of each code, from codes.
var statusOf = func() map[Code]int {
	m := make(map[Code]int, len(codes))
	for _, c := range codes {
		m[c.code] = c.status
	}
	return m
}()

// Error is an API error: a code, a message for people and, for bad input,
// the field at fault.
type Error struct {
	Code       Code
	Message    string
	Field      string
	RetryAfter int // seconds, for rate_limited and unavailable
	// Suggestions are the best candidates of an ambiguous intent.
	Suggestions []intentCandidateJSON
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Invalid returns an invalid_argument error naming field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidArgument, Field: field, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a not_found error.
func NotFound(format string, args ...any) *Error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code        Code                  `json:"code"`
	Message     string                `json:"message"`
	Field       string                `json:"field,omitempty"`
	Suggestions []intentCandidateJSON `json:"suggestions,omitempty"`
}

// toAPIError classifies any error: API errors as they are, the few errors
// with codes of their own, then by kind (the kinds table); a database
// outage is unavailable; anything else is internal (its text is logged, not
// shown).
func toAPIError(err error) *Error {
	var apiErr *Error
	var kindErr *domain.KindError
	var fieldErr *domain.FieldError
	var maxErr *http.MaxBytesError
	var ambiguous *domain.AmbiguousIntentError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &ambiguous):
		return &Error{Code: CodeAmbiguousIntent, Field: "intent", Message: ambiguous.Error(),
			Suggestions: toCandidatesJSON(ambiguous.Resolution.Candidates)}
	case errors.As(err, &fieldErr):
		code := CodeInvalidArgument
		if fieldErr.TooLarge {
			code = CodePayloadTooLarge
		}
		return &Error{Code: code, Field: fieldErr.Field, Message: fieldErr.Field + " " + fieldErr.Message}
	case errors.As(err, &maxErr):
		return &Error{Code: CodePayloadTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit)}
	case errors.As(err, &kindErr):
		e := &Error{Code: Code(kindErr.Code), Field: kindErr.Field, Message: err.Error()}
		if statusOf[e.Code] == 0 {
			e.Code = codeOf(kindErr.Kind) // no code of its own (or one the table lacks): its kind's
		}
		if e.Code == CodeInternal {
			break // of none of the table's kinds: internal, its text for the log only
		}
		if kindErr.Public != "" {
			e.Message = kindErr.Public
		}
		return withRetry(e)
	}
	if c := codeOf(err); c != CodeInternal {
		return withRetry(&Error{Code: c, Message: err.Error()})
	}
	if databaseUnavailable(err) {
		return &Error{Code: CodeUnavailable, Message: "the database is unavailable: try again shortly", RetryAfter: 2}
	}
	return &Error{Code: CodeInternal, Message: "internal error"}
}

// codeOf is the code of err's kind, by the codes table; internal when it
// is of none.
func codeOf(err error) Code {
	for _, c := range codes {
		if c.kind != nil && errors.Is(err, c.kind) {
			return c.code
		}
	}
	return CodeInternal
}

// withRetry sets the code's Retry-After on e.
func withRetry(e *Error) *Error {
	for _, c := range codes {
		if c.code == e.Code && e.RetryAfter == 0 {
			e.RetryAfter = c.retryAfter
		}
	}
	return e
}

// rpcCode is the JSON-RPC code of an API error code, by the same table.
func rpcCode(code Code) int {
	for _, c := range codes {
		if c.code == code {
			return c.rpc
		}
	}
	return -32603
}

// databaseUnavailable tells an outage (no connection, the server shutting
// down or full) from a failed statement, by type and SQLSTATE class.
func databaseUnavailable(err error) bool {
	var connErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	var opErr *net.OpError
	switch {
	case errors.As(err, &connErr), errors.As(err, &opErr), errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, io.ErrUnexpectedEOF):
		// The connection died: the request may be tried again (a write of
		// the unit of work whose COMMIT lost it asked what became of it,
		// eventstore.CommitOutcome; another write's may have committed,
		// and each is safe to repeat).
		return true
	case errors.As(err, &pgErr):
		// 08: connection exception; 57P01-03: shutdown, crash, cannot
		// connect now; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	return false
}

// errorMiddleware writes the error body for the last error a handler
// recorded with c.Error.
func errorMiddleware(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		if len(c.Errors) == 0 || c.Writer.Written() {
			return
		}
		err := c.Errors.Last().Err
		apiErr := toAPIError(err)
		status := statusOf[apiErr.Code]
		var refused writeRefused
		if status >= 500 && !errors.As(err, &refused) {
			logger.ErrorContext(c.Request.Context(), "request failed", "method", c.Request.Method, "path", c.FullPath(), "err", err)
		}
		if apiErr.Code == CodeUnauthenticated {
			// Bearer, not Basic: a browser opens no login dialog of its
			// own; the dashboard's key form signs in (session.go).
			c.Header("WWW-Authenticate", `Bearer realm="agentreach"`)
		}
		if apiErr.RetryAfter > 0 {
			c.Header("Retry-After", strconv.Itoa(apiErr.RetryAfter))
		}
		c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: apiErr.Code, Message: apiErr.Message, Field: apiErr.Field,
			Suggestions: apiErr.Suggestions}})
	}
}
