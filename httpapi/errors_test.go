package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/a2a/adapter"
	"github.com/agentreach/agentreach/a2a/card"
	"github.com/agentreach/agentreach/a2a/server"
	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/registry"
	"github.com/agentreach/agentreach/sql"
)

// TestErrorKinds: every package's errors reach the API by their kind, with
// one HTTP status and one JSON-RPC code each.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("doing something: %w", err) }
	for _, tc := range []struct {
		err    error
		status int
		code   Code
		rpc    error
	}{
		{wrap(domain.ErrNotFound), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(card.ErrNoCard), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(registry.ErrGone), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(domain.ErrIllegalTransition), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(domain.ErrIllegalAgentTransition), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(eventstore.ErrConflict), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(registry.ErrAmbiguous), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(&domain.FieldError{Field: "x", Message: "is bad"}), 400, CodeInvalidArgument, a2a.ErrInvalidParams},
		{wrap(auth.ErrExpired), 401, CodeUnauthenticated, a2a.ErrInvalidRequest},
		{wrap(registry.ErrUnauthenticated), 401, CodeUnauthenticated, a2a.ErrInvalidRequest},
		{wrap(server.ErrPushToken), 401, CodeUnauthenticated, a2a.ErrInvalidRequest},
		{wrap(jobs.ErrForbidden), 403, CodePermissionDenied, a2a.ErrInvalidRequest},
		{wrap(adapter.ErrAgentUnavailable), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(jobs.ErrFanout), 422, CodeFanoutExceeded, a2a.ErrInvalidRequest},
		{wrap(jobs.ErrOverloaded), 429, CodeOverloaded, a2a.ErrInvalidRequest},
		{wrap(registry.ErrNotPull), 409, CodeNotPull, a2a.ErrInvalidRequest},
		{wrap(sql.ErrNotMigrated), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(&pgconn.PgError{Code: "57P01"}), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(&pgconn.PgError{Code: "22P05"}), 500, CodeInternal, a2a.ErrInternalError},
		{wrap(pgconn.ErrConnClosed), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(io.ErrUnexpectedEOF), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(eventstore.ErrCommitUnknown), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(eventstore.ErrAborted), 503, CodeUnavailable, a2a.ErrInternalError},
		{errors.New("something else"), 500, CodeInternal, a2a.ErrInternalError},
	} {
		e := toAPIError(tc.err)
		require.Equal(t, tc.code, e.Code, "%v", tc.err)
		require.Equal(t, tc.status, statusOf[e.Code], "%v", tc.err)
		require.ErrorIs(t, rpcError(tc.err), tc.rpc, "%v", tc.err)
		if e.Code == CodeInternal {
			require.Equal(t, "internal error", e.Message, "an internal error's text is not shown")
			require.Equal(t, a2a.ErrInternalError, rpcError(tc.err))
		}
	}
	// The A2A errors of their own.
	require.ErrorIs(t, rpcError(jobs.ErrConflict), a2a.ErrInvalidRequest, "a conflict is not a task that cannot be cancelled")
	require.ErrorIs(t, rpcError(server.ErrPushConfig), a2a.ErrUnsupportedOperation)
	// Messages of their own, that name nothing internal.
	require.Equal(t, "concurrent change, try again", toAPIError(wrap(eventstore.ErrConflict)).Message)
	require.NotContains(t, toAPIError(fmt.Errorf("attempt 1 of job x belongs to agent secret-id: %w", jobs.ErrForbidden)).Message, "secret-id")
	// An agent's network error wrapped in a kind keeps its kind.
	require.Equal(t, CodeUnavailable, toAPIError(fmt.Errorf("%w: %w", adapter.ErrAgentUnavailable, &net.OpError{Op: "dial"})).Code)
	// The code, field and message travel on the kind error.
	e := toAPIError(wrap(jobs.ErrFanout))
	require.Equal(t, "parent_job_id", e.Field)
	require.Equal(t, 5, toAPIError(wrap(jobs.ErrOverloaded)).RetryAfter)
	require.Equal(t, 2, toAPIError(wrap(adapter.ErrAgentUnavailable)).RetryAfter)
	e = toAPIError(wrap(registry.ErrAmbiguous))
	require.Equal(t, "namespace", e.Field)
	require.Contains(t, e.Message, "?namespace=")
	// A kind error of no kind of the table is internal, its text not
	// shown; one whose code the table lacks is its kind's.
	e = toAPIError(wrap(&domain.KindError{Kind: errors.New("no kind of ours"), Message: "names table t_secret"}))
	require.Equal(t, CodeInternal, e.Code)
	require.Equal(t, "internal error", e.Message)
	e = toAPIError(wrap(&domain.KindError{Kind: domain.ErrConflict, Code: "no_such_code", Message: "m"}))
	require.Equal(t, CodeConflict, e.Code)
	// One row a code, each with a status and a JSON-RPC code.
	seen := map[Code]bool{}
	for _, c := range codes {
		require.False(t, seen[c.code], "code %s twice", c.code)
		seen[c.code] = true
		require.NotZero(t, c.status)
		require.NotZero(t, c.rpc)
	}
}

func TestJSONFieldDropsEmbeddedTypeNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "weight_max", jsonField("RoutingPolicy.weight_max"))
	require.Equal(t, "payload.k", jsonField("payload.k"))
	require.Equal(t, "constraints.protocol_versions", jsonField("constraints.protocol_versions"))
}
