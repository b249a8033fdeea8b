package projection

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// TestRecentSubmissionsForgetsTheOldestFirst: the memory is bounded, keeps
// only what attempt events need, and a nil memory remembers nothing.
func TestRecentSubmissionsForgetsTheOldestFirst(t *testing.T) {
	t.Parallel()
	job := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		job[n] = domain.JobStream(uuid.Must(uuid.NewV7()).String())
	}
	r := NewRecentSubmissions(2)
	r.put(job["a"], domain.Submitted{Namespace: "ns", Capability: "a", Payload: []byte(`{"big":1}`)})
	r.put(job["b"], domain.Submitted{Namespace: "ns", Capability: "b"})
	r.put(job["a"], domain.Submitted{Namespace: "ns", Capability: "changed"}) // known: kept as it was
	got, ok := r.get(job["a"])
	require.True(t, ok)
	require.Equal(t, domain.Submitted{Namespace: "ns", Capability: "a"}, got, "namespace and capability only")
	r.put(job["c"], domain.Submitted{Namespace: "ns", Capability: "c"})
	_, ok = r.get(job["a"])
	require.False(t, ok, "the oldest is forgotten")
	for _, s := range []string{job["b"], job["c"]} {
		_, ok = r.get(s)
		require.True(t, ok, s)
	}
	r.put(job["d"], domain.Submitted{Capability: "d"})
	_, ok = r.get(job["b"])
	require.False(t, ok, "then the next oldest")

	r.put("direct:x", domain.Submitted{Capability: "x"})
	_, ok = r.get("direct:x")
	require.False(t, ok, "a stream that is not a job's is not remembered")
	c, _ := r.get(job["c"])
	d, _ := r.get(job["d"])
	require.Equal(t, "ns", c.Namespace, "shared with the jobs before")
	require.Empty(t, d.Namespace)

	var none *RecentSubmissions
	none.put(job["a"], domain.Submitted{Capability: "a"})
	_, ok = none.get(job["a"])
	require.False(t, ok)
}
