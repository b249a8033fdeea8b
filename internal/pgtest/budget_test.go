package pgtest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBudgetWaitsForConnections: a reservation that does not fit waits
// until an earlier one is given back, and never overdraws the budget.
func TestBudgetWaitsForConnections(t *testing.T) {
	t.Parallel()
	bg := budget{path: filepath.Join(t.TempDir(), "conns"), size: func() int { return 10 }}
	held := func() int {
		_, n, err := bg.change(func(r []reservation) ([]reservation, bool) { return r, false })
		require.NoError(t, err)
		return n
	}

	release := make(chan struct{})
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		t.Run("first", func(t *testing.T) {
			bg.reserve(t, 7)
			<-release
		})
	}()
	require.Eventually(t, func() bool { return held() == 7 }, 10*time.Second, 5*time.Millisecond)

	got := make(chan int)
	go func() {
		t.Run("second", func(t *testing.T) {
			bg.reserve(t, 5) // 7 + 5 > 10: waits for the first
			got <- held()
		})
	}()
	select {
	case n := <-got:
		t.Fatalf("the second reservation did not wait (held %d)", n)
	case <-time.After(200 * time.Millisecond): // it is still waiting: the check that could fail
	}
	close(release)
	<-firstDone
	require.Equal(t, 5, <-got, "the second holds its 5 once the first gave its 7 back")
	require.Eventually(t, func() bool { return held() == 0 }, 10*time.Second, 5*time.Millisecond)

	// A reservation larger than the budget takes the whole budget.
	t.Run("whole", func(t *testing.T) {
		bg.reserve(t, 99)
		require.Equal(t, 10, held())
	})
}
