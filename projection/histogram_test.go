package projection_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
	"github.com/agentreach/agentreach/internal/pgtest"
)

// TestLatencyHistogramAgreesWithSQL: the projection counts latencies into
// buckets in Go; the SQL that reads them (reach_hist_quantile) and
// reach_hist_of, which analysts may use, bucket the same way.
func TestLatencyHistogramAgreesWithSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var ms []float64
	for v := 0.01; v < 1e8; v *= 1.037 {
		ms = append(ms, v)
	}
	ms = append(ms, 0, 1, 1.25, 1.5625, 100, math.Pow(1.25, 40)*1.0001)
	var sql []int32
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT reach_hist_of($1::float8[])`, ms).Scan(&sql))
	require.Equal(t, sql, domain.LatencyHistogram(ms))
}
