package telemetry_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

const (
	sampledA   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	unsampledC = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
)

// An output follows its own input's trace, whatever the other messages
// of its batch carry: one sampled message does not trace the outputs of
// the others. Roots are never sampled here (parentbased_always_off), so
// of a batch of an untraced message, an unsampled one, a sampled one and
// another untraced one, only the sampled one's output is traced (a "send"
// under the plugin's "handle", in that message's trace, which the batch's
// "process" continues although an unsampled message came first), the
// unsampled one's carries its own unsampled context, and the untraced
// ones' carry none.
func TestAnOutputFollowsItsOwnInputsTrace(t *testing.T) {
	f := runFollowBatch(t, "parentbased_always_off", []string{"", unsampledC, sampledA, ""})
	for i, want := range []struct {
		trace   string // "" for no traceparent
		sampled bool
	}{{"", false}, {"0af7651916cd43dd8448eb211c80319c", false}, {"4bf92f3577b34da6a3ce929d0e0e4736", true}, {"", false}} {
		sc := f.outputs[i]
		switch {
		case want.trace == "" && sc.IsValid():
			t.Errorf("output of input %d (no context): traceparent of trace %s, want none", i, sc.TraceID())
		case want.trace != "" && (sc.TraceID().String() != want.trace || sc.IsSampled() != want.sampled):
			t.Errorf("output of input %d: trace %s sampled %v, want %s sampled %v", i, sc.TraceID(), sc.IsSampled(),
				want.trace, want.sampled)
		}
	}
	sends := f.spans(msgtrace.SendName(f.out))
	if len(sends) != 1 || hex.EncodeToString(sends[0].TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("send spans of the outputs: %v; want one, in the sampled input's trace", sends)
	}
	handle := f.byID(sends[0].ParentSpanId)
	process := f.byID(handle.ParentSpanId)
	if handle.Name != "handle follow" || process.Name != msgtrace.ProcessName(f.in) ||
		hex.EncodeToString(process.ParentSpanId) != "00f067aa0ba902b7" {
		t.Errorf("the sampled output's send is under %q under %q (parent %x); want handle follow, process, the input's context",
			handle.Name, process.Name, process.ParentSpanId)
	}
}

// Where an input has no context and its batch continues another
// message's trace, its output gets a root decision of its own (a root
// "process" span for such messages, here always sampled), not the other
// message's trace.
func TestAnOutputWithoutAContextGetsARootDecision(t *testing.T) {
	f := runFollowBatch(t, "always_on", []string{sampledA, ""})
	a, b := f.outputs[0], f.outputs[1]
	if a.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !a.IsSampled() {
		t.Errorf("the sampled input's output: traceparent %q", tpOf(a))
	}
	if !b.IsValid() || !b.IsSampled() || b.TraceID() == a.TraceID() {
		t.Fatalf("the untraced input's output: traceparent %q; want a sampled trace of its own", tpOf(b))
	}
	var send *otlptest.Span
	for _, s := range f.spans(msgtrace.SendName(f.out)) {
		if hex.EncodeToString(s.TraceId) == b.TraceID().String() {
			send = &s
		}
	}
	if send == nil {
		t.Fatalf("no send span in the untraced input's new trace %s", b.TraceID())
	}
	if root := f.byID(send.ParentSpanId); root.Name != msgtrace.ProcessName(f.in) || len(root.ParentSpanId) != 0 {
		t.Errorf("its send is under %q (parent %x); want a root process span", root.Name, root.ParentSpanId)
	}
}

func tpOf(sc trace.SpanContext) string { tp, _ := msgtrace.Format(sc); return tp }

// followBatch is what runFollowBatch saw.
type followBatch struct {
	in, out string
	outputs []trace.SpanContext // the context each input's output carried
	got     []otlptest.Span
}

func (f followBatch) spans(name string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range f.got {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (f followBatch) byID(id []byte) otlptest.Span {
	for _, s := range f.got {
		if string(s.SpanId) == string(id) {
			return s
		}
	}
	return otlptest.Span{}
}

// runFollowBatch hands inputs (their traceparents, "" for none) to a
// plugin in one batch, on a host sampling with sampler, and returns the
// contexts of their outputs and the spans received once the host and its
// plugin flushed them.
func runFollowBatch(t *testing.T, sampler string, inputs []string) followBatch {
	ctx := testContext(t)
	rcv := otlptest.Start(t, telemetry.ProtocolGRPC)
	cfg := telemetry.Config{Endpoint: rcv.URL, Sampler: sampler}
	tp, err := telemetry.NewTracing(ctx, cfg, telemetry.TracingOptions{Logger: testLogger(t, 0)})
	if err != nil {
		t.Fatal(err)
	}
	c := cluster(t)
	f := followBatch{in: topic(t, "in"), out: topic(t, "out")}
	cl := client(t, c)
	for i, tp := range inputs {
		m := pool.Message{Payload: []byte{'a' + byte(i)}}
		if tp != "" {
			m.Properties = map[string]string{msgtrace.PropertyTraceParent: tp}
		}
		if _, err := cl.Publish(ctx, f.in, m); err != nil {
			t.Fatal(err)
		}
	}
	h := selfHandler(f.out)
	h.BatchSize, h.BatchWait = len(inputs), time.Minute // all in one batch
	h.Instances = 1
	opts := streamrun.Options{Pool: pool.Options{ServiceURL: c.ServiceURL()}, Logger: testLogger(t, 0),
		TracerProvider: tp, PluginEnv: cfg.Environ()}
	host, err := streamrun.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- host.Run(rctx, pipelines.Pipeline{
			Name:    "follow",
			Source:  pipelines.Source{Topics: []string{f.in}, Subscription: "follow", InitialPosition: pipelines.Earliest},
			Handler: h,
			Outputs: []string{f.out},
		})
	}()
	cons, err := subscribe.New(ctx, cl, subscribe.Options{Topics: []string{f.out}, Subscription: "check",
		InitialPosition: subscribe.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	f.outputs = make([]trace.SpanContext, len(inputs))
	for range inputs {
		m, err := cons.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		i := int(strings.ToLower(string(m.Payload))[0] - 'a') // the handler upper-cases
		f.outputs[i] = msgtrace.Extract(m.Properties)
	}
	// Stopping the host closes the plugin, which exports its spans; then
	// the host's own go.
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	f.got = rcv.Spans()
	return f
}
