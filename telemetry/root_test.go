package telemetry_test

import (
	"context"
	"testing"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// Where the trace starts at the host (input without a context), the
// sampler's root decision says whether the outputs carry one: not
// sampled, they carry none (there is no trace to join); sampled, they
// carry the new trace's. An incoming context is carried on either way,
// sampled or not, with its sampled flag.
func TestRootSamplingDecidesContext(t *testing.T) {
	const (
		unsampledIn = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
		sampledIn   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	for _, tc := range []struct {
		sampler, arg string
		// the output of each input (keyed by the input's traceparent, ""
		// for none): its trace ID ("" for no traceparent, "new" for one of
		// a new trace) and whether it is sampled
		want map[string][2]string
	}{
		{"parentbased_traceidratio", "0", map[string][2]string{
			"":          {"", ""},
			unsampledIn: {"0af7651916cd43dd8448eb211c80319c", "unsampled"},
			sampledIn:   {"4bf92f3577b34da6a3ce929d0e0e4736", "sampled"},
		}},
		{"always_on", "", map[string][2]string{
			"":          {"new", "sampled"},
			unsampledIn: {"0af7651916cd43dd8448eb211c80319c", "sampled"}, // always_on ignores the parent's flag
			sampledIn:   {"4bf92f3577b34da6a3ce929d0e0e4736", "sampled"},
		}},
	} {
		t.Run(tc.sampler, func(t *testing.T) {
			ctx := testContext(t)
			rcv := otlptest.StartDiscarding(t, telemetry.ProtocolGRPC)
			cfg := telemetry.Config{Endpoint: rcv.URL, Sampler: tc.sampler, SamplerArg: tc.arg}
			tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			c := cluster(t)
			in, out := topic(t, "in"), topic(t, "out")
			h := selfHandler(out)
			h.BatchSize = 1 // each input its own batch: its own root decision
			host := runHost(t, c, streamrun.Options{TracerProvider: tp, PluginEnv: cfg.Environ()}, pipelines.Pipeline{
				Name:    "root",
				Source:  pipelines.Source{Topics: []string{in}, Subscription: "root-sub", InitialPosition: pipelines.Earliest},
				Handler: h,
				Outputs: []string{out},
			})
			waitReady(t, ctx, host)

			cl := client(t, c)
			byPayload := map[string]string{"A": "", "B": unsampledIn, "C": sampledIn}
			for payload, tp := range byPayload {
				m := pool.Message{Payload: []byte(payload)}
				if tp != "" {
					m.Properties = map[string]string{msgtrace.PropertyTraceParent: tp}
				}
				if _, err := cl.Publish(ctx, in, m); err != nil {
					t.Fatal(err)
				}
			}
			cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{out}, Subscription: "check",
				InitialPosition: subscribe.Earliest})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close(context.Background())
			for range byPayload {
				m, err := cons.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				// The handler upper-cases: the payload is the input's.
				inTP, ok := byPayload[string(m.Payload)]
				if !ok {
					t.Fatalf("unexpected output %q", m.Payload)
				}
				want := tc.want[inTP]
				got := m.Properties[msgtrace.PropertyTraceParent]
				sc := msgtrace.Extract(m.Properties)
				switch {
				case want[0] == "":
					if got != "" {
						t.Errorf("output of %q (input traceparent %q): traceparent %q, want none", m.Payload, inTP, got)
					}
					continue
				case !sc.IsValid():
					t.Errorf("output of %q (input traceparent %q): traceparent %q, want a valid one", m.Payload, inTP, got)
					continue
				case want[0] != "new" && sc.TraceID().String() != want[0]:
					t.Errorf("output of %q: trace %s, want the input's %s", m.Payload, sc.TraceID(), want[0])
				}
				if sampled := want[1] == "sampled"; sc.IsSampled() != sampled {
					t.Errorf("output of %q (input traceparent %q): traceparent %q, sampled %v, want %v",
						m.Payload, inTP, got, sc.IsSampled(), sampled)
				}
			}
		})
	}
}
