// Package telemetry sets up Agent-Reach's OpenTelemetry providers: traces
// (exported only when the standard OTEL_* variables ask for it), metrics
// through the Prometheus exporter, and a log/slog handler that stamps
// trace_id and span_id on every record logged with a context.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Options configure Setup.
type Options struct {
	ServiceName string
	Version     string
	// SpanExporter, if set, receives every span (tests use an in-memory
	// one); otherwise the OTEL_* variables decide.
	SpanExporter sdktrace.SpanExporter
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
	// Stderr receives the console exporter's output.
	Stderr io.Writer
}

// Telemetry holds the providers of one process.
type Telemetry struct {
	Tracer        trace.TracerProvider
	Meter         metric.MeterProvider
	Registry      *prometheus.Registry
	tracerSDK     *sdktrace.TracerProvider
	meterSDK      *sdkmetric.MeterProvider
	ExporterLabel string
}

// Setup builds the providers. Traces always get ids (so trace_id flows
// through logs, events and headers); they leave the process only when
// OTEL_TRACES_EXPORTER is "otlp" or "console", or, unset, when an
// OTEL_EXPORTER_OTLP_ENDPOINT is configured. The providers are not
// installed as globals, so several instances can live in one process; the
// W3C trace-context propagator is.
func Setup(ctx context.Context, o Options) (*Telemetry, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	res := resource.NewSchemaless(attribute.String("service.name", o.ServiceName), attribute.String("service.version", o.Version))

	t := &Telemetry{Registry: prometheus.NewRegistry(), ExporterLabel: "none"}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	exp := o.SpanExporter
	if exp == nil {
		var err error
		exp, t.ExporterLabel, err = exporterFromEnv(ctx, o)
		if err != nil {
			return nil, err
		}
	} else {
		t.ExporterLabel = "custom"
	}
	// Spans are recorded only when they leave the process. Without an
	// exporter no span is sampled: spans still have ids (logs, events and
	// traceparent carry the trace id), but nothing is kept of them
	// (recording them was 8 % of the allocations under load). With one, a
	// caller's traceparent decides for its request, and a job's work
	// (JobContext) is sampled.
	sampler := sdktrace.NeverSample()
	if exp != nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	topts = append(topts, sdktrace.WithSampler(sampler))
	if exp != nil {
		if o.SpanExporter != nil {
			topts = append(topts, sdktrace.WithSyncer(exp))
		} else {
			topts = append(topts, sdktrace.WithBatcher(exp))
		}
	}
	t.tracerSDK = sdktrace.NewTracerProvider(topts...)
	t.Tracer = t.tracerSDK

	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promExp, err := otelprom.New(otelprom.WithRegisterer(t.Registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.meterSDK = sdkmetric.NewMeterProvider(sdkmetric.WithReader(promExp), sdkmetric.WithResource(res))
	t.Meter = t.meterSDK
	return t, nil
}

func exporterFromEnv(ctx context.Context, o Options) (sdktrace.SpanExporter, string, error) {
	kind := strings.ToLower(strings.TrimSpace(o.Getenv("OTEL_TRACES_EXPORTER")))
	if kind == "" && (o.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || o.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
		kind = "otlp"
	}
	switch kind {
	case "", "none":
		return nil, "none", nil
	case "otlp":
		// otlptracehttp reads the OTEL_EXPORTER_OTLP_* variables itself.
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("OTLP trace exporter: %w", err)
		}
		return exp, "otlp", nil
	case "console":
		exp, err := stdouttrace.New(stdouttrace.WithWriter(o.Stderr))
		return exp, "console", err
	}
	return nil, "", fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp, console or none", kind)
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(t.tracerSDK.Shutdown(ctx), t.meterSDK.Shutdown(ctx))
}

// LogHandler wraps a slog.Handler and adds trace_id and span_id to records
// logged with a context that carries a span.
type LogHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return LogHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h LogHandler) WithGroup(name string) slog.Handler { return LogHandler{h.Handler.WithGroup(name)} }

// JobContext returns ctx carrying the trace of a job: a span context with
// the job's trace id, so that spans started from it and the traceparent
// headers sent from it belong to the job's trace, whichever path (worker,
// sweep, result) acts on the job. If ctx already carries that trace it is
// returned as it is. The stand-in parent is sampled: the spans started
// from it are recorded when traces are exported (Setup).
func JobContext(ctx context.Context, traceID string) context.Context {
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return ctx
	}
	if trace.SpanContextFromContext(ctx).TraceID() == tid {
		return ctx
	}
	var sid trace.SpanID
	copy(sid[:], tid[8:]) // a stable stand-in parent: the job's root
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Floor wraps a handler so that records below min are dropped, whatever
// the handler would take: River logs its routine at info (a "producer job
// counts" line per queue every few seconds, most of a quiet day's log), so
// its logger gets a floor of warn unless the service logs at debug.
type Floor struct {
	slog.Handler
	Min slog.Level
}

// Enabled implements slog.Handler.
func (f Floor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.Min && f.Handler.Enabled(ctx, l)
}

// WithAttrs implements slog.Handler.
func (f Floor) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Floor{Handler: f.Handler.WithAttrs(attrs), Min: f.Min}
}

// WithGroup implements slog.Handler.
func (f Floor) WithGroup(name string) slog.Handler {
	return Floor{Handler: f.Handler.WithGroup(name), Min: f.Min}
}

// Handle implements slog.Handler.
func (f Floor) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < f.Min {
		return nil
	}
	return f.Handler.Handle(ctx, r)
}
