package interop

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// The trace context crosses between the official Go client and streamrun
// both ways, in the message properties that OpenTelemetry's W3C propagator
// writes over a map carrier (as a Go program instrumenting
// pulsar-client-go does): `streamrun consume` processes a message the
// official client produced in that message's trace, and the official
// client reads the context of `streamrun produce`'s send span.
func TestTraceContextWithOfficialGoClient(t *testing.T) {
	ctx := testContext(t)
	bin, err := streamrunBinary()
	if err != nil {
		t.Fatal(err)
	}
	rcv := otlptest.Start(t, telemetry.ProtocolGRPC)
	otelEnv := append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL)
	c := newClient(t)
	topic := brokertest.TopicName(t)

	// Official client -> streamrun consume.
	upstream := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	props := map[string]string{"app": "official"}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(ctx, upstream), propagation.MapCarrier(props))
	p := newProducer(t, c, pulsar.ProducerOptions{Topic: topic})
	if _, err := p.Send(ctx, &pulsar.ProducerMessage{Payload: []byte("from the official client"), Properties: props}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "consume", "--url", tgt.serviceURL, "-t", topic, "-s", "traced",
		"--position", "earliest", "-n", "1")
	cmd.Env = otelEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("streamrun consume: %v\n%s", err, out)
	}
	var process *otlptest.Span
	for _, s := range rcv.Spans() {
		if s.Name == msgtrace.ProcessName(topic) {
			process = &s
		}
	}
	if process == nil {
		t.Fatalf("no process span: %v", rcv.Spans())
	}
	tid, sid := upstream.TraceID(), upstream.SpanID()
	if !bytes.Equal(process.TraceId, tid[:]) || !bytes.Equal(process.ParentSpanId, sid[:]) {
		t.Errorf("process span %v is not a child of the official client's context %v", process, upstream)
	}

	// streamrun produce -> official client.
	topic2 := brokertest.TopicName(t)
	cons := subscribe(t, c, pulsar.ConsumerOptions{Topic: topic2, SubscriptionName: "official",
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
	cmd = exec.CommandContext(ctx, bin, "produce", "--url", tgt.serviceURL, "-t", topic2, "-m", "from streamrun", "-q")
	cmd.Env = otelEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("streamrun produce: %v\n%s", err, out)
	}
	m := receive(ctx, t, cons)
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(m.Properties())))
	var send *otlptest.Span
	for _, s := range rcv.Spans() {
		if s.Name == msgtrace.SendName(topic2) {
			send = &s
		}
	}
	if send == nil || !got.IsValid() || hex.EncodeToString(send.SpanId) != got.SpanID().String() ||
		hex.EncodeToString(send.TraceId) != got.TraceID().String() {
		t.Errorf("the official client reads %v from properties %v; streamrun's send span: %v", got, m.Properties(), send)
	}
}
