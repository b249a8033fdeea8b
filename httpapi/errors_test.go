package httpapi

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/auth"
	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs"
	"github.com/agentreach/agentreach/registry"
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
		{wrap(jobs.ErrNotFound), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(registry.ErrNotFound), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(eventstore.ErrNotFound), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(auth.ErrNotFound), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(registry.ErrGone), 404, CodeNotFound, a2a.ErrTaskNotFound},
		{wrap(domain.ErrIllegalTransition), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(domain.ErrIllegalAgentTransition), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(eventstore.ErrConflict), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(registry.ErrAmbiguous), 409, CodeConflict, a2a.ErrInvalidRequest},
		{wrap(&domain.FieldError{Field: "x", Message: "is bad"}), 400, CodeInvalidArgument, a2a.ErrInvalidParams},
		{wrap(auth.ErrExpired), 401, CodeUnauthenticated, a2a.ErrInvalidRequest},
		{wrap(registry.ErrUnauthenticated), 401, CodeUnauthenticated, a2a.ErrInvalidRequest},
		{wrap(jobs.ErrPushToken), 401, CodeUnauthenticated, a2a.ErrInvalidRequest},
		{wrap(jobs.ErrForbidden), 403, CodePermissionDenied, a2a.ErrInvalidRequest},
		{wrap(jobs.ErrAgentUnavailable), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(jobs.ErrFanout), 422, CodeFanoutExceeded, a2a.ErrInvalidRequest},
		{wrap(&pgconn.PgError{Code: "57P01"}), 503, CodeUnavailable, a2a.ErrInternalError},
		{wrap(&pgconn.PgError{Code: "22P05"}), 500, CodeInternal, a2a.ErrInternalError},
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
	require.ErrorIs(t, rpcError(jobs.ErrPushConfig), a2a.ErrUnsupportedOperation)
	// Messages of their own, that name nothing internal.
	require.Equal(t, "concurrent change, try again", toAPIError(wrap(eventstore.ErrConflict)).Message)
	require.NotContains(t, toAPIError(fmt.Errorf("attempt 1 of job x belongs to agent secret-id: %w", jobs.ErrForbidden)).Message, "secret-id")
	// An agent's network error wrapped in a kind keeps its kind.
	require.Equal(t, CodeUnavailable, toAPIError(fmt.Errorf("%w: %w", jobs.ErrAgentUnavailable, &net.OpError{Op: "dial"})).Code)
	// Every code has a status.
	for _, k := range kinds {
		require.Contains(t, statusOf, k.code)
	}
}

func TestJSONFieldDropsEmbeddedTypeNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "weight_max", jsonField("RoutingPolicy.weight_max"))
	require.Equal(t, "payload.k", jsonField("payload.k"))
	require.Equal(t, "constraints.protocol_versions", jsonField("constraints.protocol_versions"))
}
