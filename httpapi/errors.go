package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/registry"
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
)

// statusOf is the one place where error codes meet HTTP statuses.
var statusOf = map[Code]int{
	CodeInvalidArgument:  http.StatusBadRequest,
	CodeUnauthenticated:  http.StatusUnauthorized,
	CodePermissionDenied: http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeConflict:         http.StatusConflict,
	CodePayloadTooLarge:  http.StatusRequestEntityTooLarge,
	CodeFanoutExceeded:   http.StatusUnprocessableEntity,
	CodeRateLimited:      http.StatusTooManyRequests,
	CodeOverloaded:       http.StatusTooManyRequests,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeHeadersTooLarge:  http.StatusRequestHeaderFieldsTooLarge,
	CodeInternal:         http.StatusInternalServerError,
	CodeNotPull:          http.StatusConflict,
	CodeAmbiguousIntent:  http.StatusUnprocessableEntity,
}

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

// kinds is the one table where error kinds meet the API's codes: each
// kind's code (and so its HTTP status) and its JSON-RPC code.
var kinds = []struct {
	kind error
	code Code
	rpc  int
}{
	{domain.ErrInvalid, CodeInvalidArgument, -32602},
	{domain.ErrUnauthenticated, CodeUnauthenticated, -32600},
	{domain.ErrForbidden, CodePermissionDenied, -32600},
	{domain.ErrNotFound, CodeNotFound, -32001},
	{domain.ErrConflict, CodeConflict, -32600},
	{domain.ErrUnavailable, CodeUnavailable, -32603},
}

// toAPIError classifies any error: API errors as they are, the few errors
// with codes of their own, then by kind (the kinds table); a database
// outage is unavailable; anything else is internal (its text is logged, not
// shown).
func toAPIError(err error) *Error {
	var apiErr *Error
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
		return &Error{Code: CodeInvalidArgument, Field: fieldErr.Field, Message: fieldErr.Field + " " + fieldErr.Message}
	case errors.As(err, &maxErr):
		return &Error{Code: CodePayloadTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", maxErr.Limit)}
	case errors.Is(err, jobs.ErrOverloaded):
		return &Error{Code: CodeOverloaded, Message: err.Error(), RetryAfter: 5}
	case errors.Is(err, jobs.ErrFanout):
		return &Error{Code: CodeFanoutExceeded, Field: "parent_job_id", Message: err.Error()}
	case errors.Is(err, registry.ErrNotPull):
		return &Error{Code: CodeNotPull, Message: err.Error()}
	case errors.Is(err, registry.ErrAmbiguous):
		return &Error{Code: CodeConflict, Field: "namespace", Message: "this agent id is in several namespaces: name one with ?namespace="}
	case errors.Is(err, registry.ErrUnauthenticated):
		return &Error{Code: CodeUnauthenticated, Message: "agent token missing or invalid (Authorization: Bearer <token>)"}
	case errors.Is(err, registry.ErrNotFound) && !errors.Is(err, registry.ErrGone):
		return &Error{Code: CodeNotFound, Message: err.Error() + ": register it"}
	case errors.Is(err, jobs.ErrForbidden):
		return &Error{Code: CodePermissionDenied, Message: "this token does not belong to the agent of that attempt"}
	case errors.Is(err, eventstore.ErrConflict):
		return &Error{Code: CodeConflict, Message: "concurrent change, try again"}
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			e := &Error{Code: k.code, Message: err.Error()}
			if k.code == CodeUnavailable {
				e.RetryAfter = 2
			}
			return e
		}
	}
	if databaseUnavailable(err) {
		return &Error{Code: CodeUnavailable, Message: "the database is unavailable: try again shortly", RetryAfter: 2}
	}
	return &Error{Code: CodeInternal, Message: "internal error"}
}

// rpcCode is the JSON-RPC code of an API error code, by the same table:
// the codes of their own (too large, rate limited) are invalid requests.
func rpcCode(c Code) int {
	for _, k := range kinds {
		if k.code == c {
			return k.rpc
		}
	}
	if c == CodeInternal {
		return -32603
	}
	return -32600
}

// databaseUnavailable tells an outage (no connection, the server shutting
// down or full) from a failed statement, by type and SQLSTATE class.
func databaseUnavailable(err error) bool {
	var connErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	var opErr *net.OpError
	switch {
	case errors.As(err, &connErr), errors.As(err, &opErr):
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
		if status >= 500 {
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
