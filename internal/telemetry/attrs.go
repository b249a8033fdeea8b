package telemetry

import (
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// measureOpts are metric attribute options by their key=value pairs: an
// attribute set is built once, not at every measurement (a set sorts and
// copies its attributes).
var measureOpts sync.Map // string → metric.MeasurementOption

// WithAttrs is metric.WithAttributes(kv...), built once per distinct kv.
func WithAttrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	var key strings.Builder
	for _, a := range kv {
		key.WriteString(string(a.Key))
		key.WriteByte('=')
		key.WriteString(a.Value.String())
		key.WriteByte(0)
	}
	if o, ok := measureOpts.Load(key.String()); ok {
		return o.(metric.MeasurementOption)
	}
	o := metric.WithAttributes(kv...)
	measureOpts.Store(key.String(), o)
	return o
}
