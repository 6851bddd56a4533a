package clienttrace

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Without OTEL_* settings tracing is off: Start returns nil, and a nil
// Tracing hands messages and callbacks back untouched.
func TestOffWithoutEnvironment(t *testing.T) {
	tr, err := Start(context.Background(), telemetry.Config{}, func(string) string { return "" }, nil)
	if err != nil || tr != nil {
		t.Fatalf("Start = %v, %v; want nil, nil", tr, err)
	}
	m, done := tr.Send("t", pool.Message{Payload: []byte("x")}, nil)
	if m.Properties != nil || done != nil {
		t.Errorf("a nil Tracing changed the message: %+v", m)
	}
	if s := tr.Process(&subscribe.Message{}, "s"); s != nil {
		t.Errorf("a nil Tracing started a span")
	}
	tr.Shutdown(time.Second)
}

// A message sent and then received makes one trace: the "process" span
// is the child of, and linked to, the "send" span whose context the
// message's properties carried; both reach the collector by Shutdown.
func TestSendThenProcessIsOneTrace(t *testing.T) {
	rcv := otlptest.Start(t, telemetry.ProtocolGRPC)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_SERVICE_NAME": "clienttrace-test"}
	tr, err := Start(context.Background(), telemetry.Config{}, func(k string) string { return env[k] }, nil)
	if err != nil || tr == nil {
		t.Fatalf("Start = %v, %v", tr, err)
	}
	const topic = "persistent://public/default/clienttrace"
	acked := false
	m, done := tr.Send(topic, pool.Message{Payload: []byte("x")}, func(pulsarwire.MessageID, error) { acked = true })
	if m.Properties["traceparent"] == "" {
		t.Fatalf("the message carries no trace context: %v", m.Properties)
	}
	id := pulsarwire.MessageID{Ledger: 7, Entry: 3}
	done(id, nil)
	if !acked {
		t.Fatal("the wrapped callback did not call the caller's")
	}
	tr.Process(&subscribe.Message{Topic: topic, ID: id, Properties: m.Properties}, "sub").End()
	tr.Shutdown(10 * time.Second)

	var send, process *otlptest.Span
	for _, s := range rcv.Spans() {
		switch s.Name {
		case msgtrace.SendName(topic):
			send = &s
		case msgtrace.ProcessName(topic):
			process = &s
		}
	}
	if send == nil || process == nil {
		t.Fatalf("spans received: %v", rcv.Spans())
	}
	if !bytes.Equal(process.ParentSpanId, send.SpanId) || len(process.Links) != 1 || !bytes.Equal(process.Links[0].SpanId, send.SpanId) {
		t.Errorf("process %v is not the child of, and linked to, send %v", process, send)
	}
	if process.Attr("messaging.consumer.group.name") != "sub" || send.Service != "clienttrace-test" {
		t.Errorf("send %v, process %v", send.Attributes, process.Attributes)
	}
}
