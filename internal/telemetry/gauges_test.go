package telemetry

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// readGauges collects once and returns each gauge's points as
// "label=value" → reading.
func readGauges(t *testing.T, g Gauges) map[string]map[string]int64 {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	require.NoError(t, RegisterGauges(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), g))
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			points := map[string]int64{}
			for _, p := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				kv := p.Attributes.ToSlice()[0]
				points[string(kv.Key)+"="+kv.Value.AsString()] = p.Value
			}
			out[m.Name] = points
		}
	}
	return out
}

func TestGauges(t *testing.T) {
	t.Parallel()
	ready := true
	var depthErr, lagErr error
	g := Gauges{
		Ready:       func() bool { return ready },
		QueueDepths: func(context.Context) (map[string]int64, error) { return map[string]int64{"dispatch_high": 3}, depthErr },
		AgentStates: func(context.Context) map[string]int64 { return map[string]int64{"HEALTHY": 2, "DOWN": 0} },
		Lag:         func(context.Context) (map[string]int64, error) { return map[string]int64{"jobs": 7}, lagErr },
	}
	require.Equal(t, map[string]map[string]int64{
		"agentreach.queue.depth":   {"queue=dispatch_high": 3},
		"agentreach.agents":        {"state=HEALTHY": 2, "state=DOWN": 0},
		"agentreach.projector.lag": {"projection=jobs": 7},
	}, readGauges(t, g))

	lagErr = errors.New("no lag")
	got := readGauges(t, g)
	require.NotContains(t, got, "agentreach.projector.lag", "a failed lag is left out")
	require.Contains(t, got, "agentreach.agents")

	depthErr = errors.New("no depth")
	require.Empty(t, readGauges(t, g), "a failed depth leaves the scrape without readings")

	ready, depthErr = false, nil
	require.Empty(t, readGauges(t, g), "nothing before the schema is current")
}
