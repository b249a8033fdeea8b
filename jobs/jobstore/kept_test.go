package jobstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/eventstore"
)

func keptFold(id string, payload int) *Loaded {
	l := &Loaded{Records: make([]eventstore.Record, 1)}
	l.JobID = id
	l.Payload = json.RawMessage(`"` + strings.Repeat("x", payload) + `"`)
	return l
}

// TestKeptFolds: a kept fold is handed out once, without its records; a
// newer fold of the same job replaces it; past keptMax folds or keptBytes
// of payloads the oldest go; a fold too large is not kept at all.
func TestKeptFolds(t *testing.T) {
	t.Parallel()
	s := &Store{}
	first, again := keptFold("a", 10), keptFold("a", 10)
	s.Keep(first)
	s.Keep(again)
	require.Same(t, again, s.Kept("a"))
	require.Nil(t, again.Records)
	require.Nil(t, s.Kept("a"), "handed out once")
	require.Zero(t, s.kept.bytes)

	for i := range keptMax + 1 {
		s.Keep(keptFold(fmt.Sprint(i), 10))
	}
	require.Nil(t, s.Kept("0"), "the oldest went")
	require.NotNil(t, s.Kept("1"))
	require.NotNil(t, s.Kept(fmt.Sprint(keptMax)))

	big := keptBytes/64 - 600
	for i := range 70 {
		s.Keep(keptFold(fmt.Sprint("big", i), big))
	}
	require.LessOrEqual(t, s.kept.bytes, keptBytes)
	require.Nil(t, s.Kept("big0"), "past the bytes, the oldest went")
	require.NotNil(t, s.Kept("big69"))

	s.Keep(keptFold("huge", keptBytes/64))
	require.Nil(t, s.Kept("huge"), "too large to keep")
}
