package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentreach/agentreach/internal/telemetry"
)

// TestJobSpansRecordedOnlyWhenExported: a job's spans keep its trace id
// either way; they are recorded and sent on as sampled only when traces
// leave the process.
func TestJobSpansRecordedOnlyWhenExported(t *testing.T) {
	t.Parallel()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	noEnv := func(string) string { return "" }
	cases := []struct {
		name     string
		exporter *tracetest.InMemoryExporter
		recorded bool
	}{
		{"no exporter", nil, false},
		{"an exporter", tracetest.NewInMemoryExporter(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := telemetry.Options{ServiceName: "test", Getenv: noEnv}
			if c.exporter != nil {
				opts.SpanExporter = c.exporter
			}
			tel, err := telemetry.Setup(context.Background(), opts)
			require.NoError(t, err)
			defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()

			tracer := tel.Tracer.Tracer("test")
			_, span := tracer.Start(telemetry.JobContext(context.Background(), traceID), "deliver")
			require.Equal(t, c.recorded, span.IsRecording())
			span.End()
			sc := span.SpanContext()
			require.Equal(t, traceID, sc.TraceID().String(), "the job's trace id either way")
			require.True(t, sc.SpanID().IsValid(), "a span id of its own")
			require.Equal(t, c.recorded, sc.IsSampled(), "what traceparent says downstream")

			// A root span (a request with no traceparent) alike.
			_, root := tracer.Start(context.Background(), "/v1/jobs")
			require.Equal(t, c.recorded, root.IsRecording())
			root.End()
			require.True(t, root.SpanContext().TraceID().IsValid(), "a root still has a trace id")

			// A request whose caller did not sample its trace is not
			// recorded either way.
			unsampled := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true}))
			_, req := tracer.Start(unsampled, "/v1/jobs")
			require.False(t, req.IsRecording(), "the caller's decision stands")
			req.End()
			if c.exporter != nil {
				require.Len(t, c.exporter.GetSpans(), 2)
			}
		})
	}
}
