package msgtrace

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Format writes what the W3C propagator writes, and Extract reads it back;
// Inject leaves the message's own map alone.
func TestFormatInjectExtract(t *testing.T) {
	ts, _ := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: flags, TraceState: ts, Remote: true,
		})
		want := map[string]string{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), propagation.MapCarrier(want))
		tp, tst := Format(sc)
		if tp != want[PropertyTraceParent] || tst != want[PropertyTraceState] {
			t.Errorf("Format = %q, %q; the propagator writes %q, %q", tp, tst, want[PropertyTraceParent], want[PropertyTraceState])
		}
		own := map[string]string{"a": "1", PropertyTraceParent: "00-00000000000000000000000000000001-0000000000000001-01"}
		got := Inject(own, sc)
		if got["a"] != "1" || got[PropertyTraceParent] != tp || own[PropertyTraceParent] == tp {
			t.Errorf("Inject: %v (the message's own map now %v)", got, own)
		}
		if back := Extract(got); !back.Equal(sc) {
			t.Errorf("Extract = %v, want %v", back, sc)
		}
	}
	if tp, _ := Format(trace.SpanContext{}); tp != "" {
		t.Errorf("Format of no context = %q", tp)
	}
	for _, bad := range []string{"", "junk", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"} {
		if sc := Parse(bad, ""); sc.IsValid() {
			t.Errorf("Parse(%q) is valid", bad)
		}
	}
}

// Parse reads what the W3C propagator reads, and refuses what it refuses.
func TestParseAsThePropagator(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tp := range []string{
		"00-" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-00",
		"00-" + tid + "-" + sid + "-03", // flags it does not know, kept
		"01-" + tid + "-" + sid + "-01-what-comes-later",
		"01-" + tid + "-" + sid + "-01",
		"00-" + tid + "-" + sid + "-01-extra", // version 00 has nothing after
		"ff-" + tid + "-" + sid + "-01",
		"00-" + strings.ToUpper(tid) + "-" + sid + "-01",
		"00-" + tid + "-0000000000000000-01",
		"00-00000000000000000000000000000000-" + sid + "-01",
		"00-" + tid + "-" + sid + "-0g",
		"00_" + tid + "-" + sid + "-01",
		"0-" + tid + "-" + sid + "-01",
		"",
	} {
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(),
			propagation.MapCarrier{PropertyTraceParent: tp, PropertyTraceState: "rojo=1"}))
		if got := Parse(tp, "rojo=1"); !got.Equal(want) {
			t.Errorf("Parse(%q) = %v, the propagator reads %v", tp, got, want)
		}
	}
}
