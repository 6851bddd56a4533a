package msgtrace

import (
	"context"
	"encoding/hex"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Message property names of the W3C trace context.
const (
	PropertyTraceParent = "traceparent"
	PropertyTraceState  = "tracestate"
)

// propagator is fixed, not the program's global one: the properties'
// format is part of what streamrun exchanges with other clients.
var propagator propagation.TraceContext

// Properties is a message's properties as a propagation.TextMapCarrier.
type Properties map[string]string

// Get returns the value of key, "" when there is none.
func (p Properties) Get(key string) string { return p[key] }

// Set sets key to value.
func (p Properties) Set(key, value string) { p[key] = value }

// Keys lists the keys.
func (p Properties) Keys() []string {
	out := make([]string, 0, len(p))
	for k := range p {
		out = append(out, k)
	}
	return out
}

// Extract returns the creation context that properties carry, invalid
// when they carry none (or a malformed one).
func Extract(properties map[string]string) trace.SpanContext {
	if properties[PropertyTraceParent] == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), Properties(properties)))
}

// Parse returns the span context of a traceparent and tracestate pair,
// invalid when traceparent is empty or malformed.
func Parse(traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	return Extract(map[string]string{PropertyTraceParent: traceparent, PropertyTraceState: tracestate})
}

// Format returns sc as traceparent and tracestate values; "" for an
// invalid sc. Written by hand, not through the propagator: it runs for
// every message published, sampled or not.
func Format(sc trace.SpanContext) (traceparent, tracestate string) {
	if !sc.IsValid() {
		return "", ""
	}
	var b [55]byte // 00-<32 hex>-<16 hex>-<2 hex>
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	if ts := sc.TraceState(); ts.Len() > 0 {
		tracestate = ts.String()
	}
	return string(b[:]), tracestate
}

// Inject returns properties with sc's trace context in them, replacing
// any there. properties itself is not changed (a message's map may be
// shared); the result is a copy, or properties when sc is invalid.
func Inject(properties map[string]string, sc trace.SpanContext) map[string]string {
	tp, ts := Format(sc)
	if tp == "" {
		return properties
	}
	out := make(map[string]string, len(properties)+2)
	maps.Copy(out, properties)
	out[PropertyTraceParent] = tp
	delete(out, PropertyTraceState)
	if ts != "" {
		out[PropertyTraceState] = ts
	}
	return out
}
