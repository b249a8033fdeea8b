package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// TestSubmitWithResolution: a submission resolved from an intent appends
// INTENT_RESOLVED right after SUBMITTED, in the same append, whether one
// by one or gathered by the group commit, before AWAITING_APPROVAL when
// the resolved capability needs approval; the fold brings the resolution
// back. An idempotent retry of the same intent is the same job though it
// resolved elsewhere; another intent under the key is a conflict.
func TestSubmitWithResolution(t *testing.T) {
	t.Parallel()
	s := newService(t)
	s.cfg.ApprovalPatterns = []string{"risky.*"}
	ctx := context.Background()
	sub := func(words, capability string) domain.Submitted {
		return domain.Submitted{Capability: capability, Intent: words, Payload: json.RawMessage(`{}`),
			Resolution: &domain.IntentResolution{Intent: words, Capability: capability, Resolver: domain.ResolverLexical, Confidence: 0.5}}
	}
	types := func(l *jobstore.Loaded) []domain.EventType {
		var out []domain.EventType
		for _, r := range l.Records {
			out = append(out, r.Type)
		}
		return out
	}
	submitted := func(sb domain.Submitted) *jobstore.Loaded {
		res, err := s.Submit(ctx, sb, domain.Metadata{Actor: "test", TraceID: "t"})
		require.NoError(t, err)
		l, err := s.Load(ctx, nil, res.JobID)
		require.NoError(t, err)
		return l
	}

	l := submitted(sub("where is my parcel", "parcel.track"))
	require.Equal(t, []domain.EventType{domain.EventSubmitted, domain.EventIntentResolved}, types(l))
	require.Equal(t, "where is my parcel", l.Intent)
	require.NotNil(t, l.Resolution)
	require.Equal(t, "parcel.track", l.Resolution.Capability)
	require.Equal(t, domain.StatusSubmitted, l.Status)

	l = submitted(sub("do the risky thing", "risky.thing"))
	require.Equal(t, []domain.EventType{domain.EventSubmitted, domain.EventIntentResolved, domain.EventAwaitingApproval}, types(l))

	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.StartGroupCommit(gctx, 2*time.Millisecond, 1)
	l = submitted(sub("我的包裹在哪里", "parcel.track"))
	require.Equal(t, []domain.EventType{domain.EventSubmitted, domain.EventIntentResolved}, types(l), "the group commit writes both")

	keyed := sub("the forecast for tomorrow", "weather.forecast")
	keyed.IdempotencyKey = "k-1"
	first, err := s.Submit(ctx, keyed, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	moved := sub("the forecast for tomorrow", "parcel.track") // the catalogue changed in between
	moved.IdempotencyKey = "k-1"
	again, err := s.Submit(ctx, moved, domain.Metadata{Actor: "test"})
	require.NoError(t, err)
	require.Equal(t, first.JobID, again.JobID)
	require.True(t, again.Existing)
	other := sub("something else", "weather.forecast")
	other.IdempotencyKey = "k-1"
	_, err = s.Submit(ctx, other, domain.Metadata{Actor: "test"})
	require.ErrorIs(t, err, ErrConflict)

	tooLong := sub(strings.Repeat("a", domain.MaxIntentLength+1), "parcel.track")
	_, err = s.Submit(ctx, tooLong, domain.Metadata{Actor: "test"})
	var fe *domain.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "intent", fe.Field)
}
