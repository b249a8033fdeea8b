package httpapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/eventstore"
	"github.com/agentreach/agentreach/jobs/jobstore"
)

// Handler tests of faces that were tested only end to end: each fills the
// face it tests with a fake (an unfilled method of a fake panics, so a
// handler that calls what it should not fails the test), with
// authentication off.

// fakeJobs loads the jobs it holds.
type fakeJobs struct {
	Jobs
	jobs map[string]*jobstore.Loaded
}

func (f *fakeJobs) Load(_ context.Context, _ eventstore.Querier, id string) (*jobstore.Loaded, error) {
	if l, ok := f.jobs[id]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("job %s: %w", id, domain.ErrNotFound)
}

// fakeApprovals keeps a policy and answers decisions with decided or err.
type fakeApprovals struct {
	policy  []string
	decided []string // "approve <id> <reason>" or "reject …"
	err     error
}

func (f *fakeApprovals) ApprovalPolicy(context.Context, string) ([]string, []string, error) {
	return f.policy, []string{"pay:*"}, nil
}

func (f *fakeApprovals) SetApprovalPolicy(_ context.Context, _ string, patterns []string, _ domain.Metadata) error {
	f.policy = patterns
	return f.err
}

func (f *fakeApprovals) decide(verb, id, reason string, status domain.JobStatus) (*jobstore.Loaded, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.decided = append(f.decided, verb+" "+id+" "+reason)
	l := &jobstore.Loaded{}
	l.JobID, l.Namespace, l.Status = id, domain.DefaultNamespace, status
	return l, nil
}

func (f *fakeApprovals) Approve(_ context.Context, id, reason string, _ domain.Metadata) (*jobstore.Loaded, error) {
	return f.decide("approve", id, reason, domain.StatusSubmitted)
}

func (f *fakeApprovals) Reject(_ context.Context, id, reason string, _ domain.Metadata) (*jobstore.Loaded, error) {
	return f.decide("reject", id, reason, domain.StatusRejected)
}

// fakeCallbacks holds a namespace's secrets and rotates them.
type fakeCallbacks struct {
	secrets map[string][]string
	err     error
}

func (f *fakeCallbacks) CallbackSecrets(_ context.Context, ns string) ([]string, error) {
	return f.secrets[ns], f.err
}

func (f *fakeCallbacks) RotateCallbackSecret(_ context.Context, ns string, _ domain.Metadata) (string, time.Time, error) {
	if f.err != nil {
		return "", time.Time{}, f.err
	}
	f.secrets[ns] = append([]string{"whsec_new"}, f.secrets[ns]...)
	return "whsec_new", time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), nil
}

func fakeAPI(deps Deps) http.Handler {
	deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	deps.Insecure = true
	return New(deps)
}

// TestApprovalFace: the policy reads and writes through the face, a bad
// body reaches nothing, a decision on a job that is not there is 404
// before the face is asked, and the face's conflict is a 409.
func TestApprovalFace(t *testing.T) {
	t.Parallel()
	const id = "0190f1c2-0000-7000-8000-000000000001"
	held := &jobstore.Loaded{}
	held.JobID, held.Namespace, held.Status = id, domain.DefaultNamespace, domain.StatusAwaitingApproval
	approvals := &fakeApprovals{}
	api := fakeAPI(Deps{Jobs: &fakeJobs{jobs: map[string]*jobstore.Loaded{id: held}}, Approvals: approvals})

	code, out := do(t, api, "PUT", "/v1/policies/approvals", `{"patterns":["deploy:*"]}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, []string{"deploy:*"}, approvals.policy)
	code, out = do(t, api, "GET", "/v1/policies/approvals", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, []any{"deploy:*"}, out["patterns"])
	require.Equal(t, []any{"pay:*"}, out["configured_patterns"])
	code, out = do(t, api, "PUT", "/v1/policies/approvals", `{"patterns":["x"],"extra":1}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Equal(t, "extra", out["error"].(map[string]any)["field"])
	require.Equal(t, []string{"deploy:*"}, approvals.policy, "a refused body changes nothing")

	code, out = do(t, api, "POST", "/v1/jobs/"+id+"/approve", `{"reason":"looks fine"}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "SUBMITTED", out["status"])
	code, out = do(t, api, "POST", "/v1/jobs/"+id+"/reject", `{}`)
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "REJECTED", out["status"])
	require.Equal(t, []string{"approve " + id + " looks fine", "reject " + id + " "}, approvals.decided)

	code, out = do(t, api, "POST", "/v1/jobs/0190f1c2-0000-7000-8000-000000000002/approve", `{}`)
	require.Equal(t, http.StatusNotFound, code, out)
	code, out = do(t, api, "POST", "/v1/jobs/"+id+"/approve", `{"reason":"x","nope":true}`)
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Len(t, approvals.decided, 2, "a refused body decides nothing")

	approvals.err = domain.NewError(domain.ErrConflict, "the job is SUCCESS, not awaiting approval")
	code, out = do(t, api, "POST", "/v1/jobs/"+id+"/approve", `{}`)
	require.Equal(t, http.StatusConflict, code, out)
	require.Equal(t, "conflict", errCode(out))
}

// TestCallbackSecretFace: the secret of the namespace asked for (the
// current one first), a rotation that answers the new one, a namespace
// the key may not see is refused, and the face's conflict (a configured
// secret) is a 409.
func TestCallbackSecretFace(t *testing.T) {
	t.Parallel()
	callbacks := &fakeCallbacks{secrets: map[string][]string{"default": {"whsec_a"}, "team": {"whsec_t"}}}
	api := fakeAPI(Deps{Callbacks: callbacks})

	code, out := do(t, api, "GET", "/v1/callbacks/secret", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "whsec_a", out["secret"])
	code, out = do(t, api, "GET", "/v1/callbacks/secret?namespace=team", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "whsec_t", out["secret"])

	code, out = do(t, api, "POST", "/v1/callbacks/secret:rotate", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, "whsec_new", out["secret"])
	require.Equal(t, "2026-12-04T00:00:00Z", out["previous_valid_until"])
	code, out = do(t, api, "GET", "/v1/callbacks/secret", "")
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, []any{"whsec_new", "whsec_a"}, out["secrets"], "both sign during the overlap")

	code, out = do(t, api, "GET", "/v1/callbacks/secret?namespace=bad%20name", "")
	require.Equal(t, http.StatusBadRequest, code, out)

	callbacks.err = domain.NewError(domain.ErrConflict, "the callback secret is configured")
	code, out = do(t, api, "POST", "/v1/callbacks/secret:rotate", "")
	require.Equal(t, http.StatusConflict, code, out)
	require.Equal(t, "conflict", errCode(out))
}

// TestNoRiverBehindTheHandlers: the handlers, the registry and the unit of
// work build without River; only jobs, registry/riverwork and cmd know it.
func TestNoRiverBehindTheHandlers(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{".", "../registry", "../jobs/jobstore", "../jobs/inbox", "../jobs/callback", "../jobs/dispatch", "../a2a/adapter"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		for _, dep := range strings.Fields(string(out)) {
			require.False(t, strings.HasPrefix(dep, "github.com/riverqueue/"), "%s imports %s", pkg, dep)
		}
	}
}

// TestTrailingSlash: a path with a trailing slash is redirected to the
// one without, as gin did, and only ever to a path of this host; one
// holding text that cannot be stored is refused first.
func TestTrailingSlash(t *testing.T) {
	t.Parallel()
	api := fakeAPI(Deps{})
	for _, tc := range []struct {
		method, path string
		code         int
		to           string
	}{
		{"GET", "/v1/jobs/?limit=5", http.StatusMovedPermanently, "/v1/jobs?limit=5"},
		{"DELETE", "/v1/keys/k1/", http.StatusTemporaryRedirect, "/v1/keys/k1"},
		{"DELETE", "/v1/keys/%C3%2F?0=0", http.StatusBadRequest, ""},
		{"GET", "//evil.example/", http.StatusNotFound, ""}, // never a Location to another host
		{"GET", "///evil.example//", http.StatusNotFound, ""},
		{"GET", "/%5Cevil.example/", http.StatusMovedPermanently, "/%5Cevil.example"},
		{"GET", "/v1/nothing", http.StatusNotFound, ""},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		require.Equal(t, tc.code, rec.Code, tc.path)
		require.Equal(t, tc.to, rec.Header().Get("Location"), tc.path)
	}
}
