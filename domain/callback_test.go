package domain

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCallbackTry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		attempt, max     int
		code             int
		errText          string
		want             EventType
		ok, final, clear bool
	}{
		// requeued: only a failed try made at once hands the callback to River
		{"acknowledged", 1, 5, 200, "", EventCallbackSent, true, false, true},
		{"acknowledged at once", 0, 0, 204, "", EventCallbackSent, true, false, true},
		{"refused, retried", 2, 5, 500, "", EventCallbackFailed, false, false, false},
		{"refused at the last attempt", 5, 5, 500, "", EventCallbackFailed, false, true, true},
		{"not reached", 1, 5, 0, "connection refused", EventCallbackFailed, false, false, false},
		{"a 2xx with an error is no acknowledgement", 1, 5, 200, "body cut", EventCallbackFailed, false, false, false},
		{"failed at once: River retries it", 0, 0, 503, "", EventCallbackFailed, false, false, false},
		{"a redirect is no acknowledgement", 1, 5, 302, "", EventCallbackFailed, false, false, false},
	} {
		ev, fx, ok := CallbackTry(tc.attempt, tc.max, tc.code, tc.errText, Metadata{})
		require.Equal(t, tc.want, ev.Type, tc.name)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.clear, fx.ClearTimer, tc.name)
		require.Equal(t, !ok && tc.attempt == 0, fx.RequeueCallback, tc.name)
		var co CallbackOutcome
		require.NoError(t, json.Unmarshal(ev.Data, &co), tc.name)
		require.Equal(t, tc.final, co.Final, tc.name)
		require.Equal(t, tc.errText, co.Error, tc.name)
		require.Equal(t, tc.attempt, co.Attempt, tc.name)
	}
}
