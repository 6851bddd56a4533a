package msgtrace

import (
	"encoding/hex"
	"maps"

	"go.opentelemetry.io/otel/trace"
)

// Message property names of the W3C trace context.
const (
	PropertyTraceParent = "traceparent"
	PropertyTraceState  = "tracestate"
)

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
	tp := properties[PropertyTraceParent]
	if tp == "" {
		return trace.SpanContext{}
	}
	return Parse(tp, properties[PropertyTraceState])
}

// Parse returns the span context of a traceparent and tracestate pair,
// invalid when traceparent is empty or malformed. It reads what the W3C
// propagator reads (version 00, or a later version's first four fields),
// by hand: it runs for every output.
func Parse(traceparent, tracestate string) trace.SpanContext {
	tp := traceparent
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || (len(tp) > 55 && tp[55] != '-') {
		return trace.SpanContext{}
	}
	var ver [1]byte
	if n, err := hex.Decode(ver[:], []byte(tp[0:2])); n != 1 || err != nil || ver[0] == 0xff ||
		(ver[0] == 0 && len(tp) != 55) || !lowerHex(tp[:55]) {
		return trace.SpanContext{}
	}
	var cfg trace.SpanContextConfig
	var flags [1]byte
	if _, err := hex.Decode(cfg.TraceID[:], []byte(tp[3:35])); err != nil {
		return trace.SpanContext{}
	}
	if _, err := hex.Decode(cfg.SpanID[:], []byte(tp[36:52])); err != nil {
		return trace.SpanContext{}
	}
	if _, err := hex.Decode(flags[:], []byte(tp[53:55])); err != nil {
		return trace.SpanContext{}
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0])
	cfg.Remote = true
	if tracestate != "" {
		// A malformed tracestate is dropped, the context kept, as the
		// propagator does.
		cfg.TraceState, _ = trace.ParseTraceState(tracestate)
	}
	sc := trace.NewSpanContext(cfg)
	if !sc.IsValid() {
		return trace.SpanContext{}
	}
	return sc
}

// lowerHex reports whether s is lowercase hex digits and dashes.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
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
