package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/msgtrace"
	"github.com/streamrun/streamrun/telemetry/otlptest"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, `streamrun produce` exports a
// "send" span per message and `streamrun consume` a "process" span per
// message, child of and linked to the send: one trace. Over both OTLP
// protocols, chosen by OTEL_EXPORTER_OTLP_PROTOCOL.
func TestProduceAndConsumeExportTraces(t *testing.T) {
	for _, protocol := range []string{telemetry.ProtocolGRPC, telemetry.ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			rcv := otlptest.Start(t, protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_SERVICE_NAME", "cli-test")
			cluster := brokertest.Start(t)
			topic := fmt.Sprintf("persistent://public/default/traced-%d", time.Now().UnixNano())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			if code := run(ctx, []string{"produce", "--url", cluster.ServiceURL(), "-t", topic, "-m", "traced", "-q"}, &stdout, &stderr); code != 0 {
				t.Fatalf("produce: exit %d: %s%s", code, stdout.String(), stderr.String())
			}
			if code := run(ctx, []string{"consume", "--url", cluster.ServiceURL(), "-t", topic, "-s", "traced-sub",
				"--position", "earliest", "-n", "1"}, &stdout, &stderr); code != 0 {
				t.Fatalf("consume: exit %d: %s%s", code, stdout.String(), stderr.String())
			}
			// Each command flushed its spans before it returned.
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
			if send.Kind != tracepb.Span_SPAN_KIND_PRODUCER || process.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
				t.Errorf("kinds: send %v, process %v", send.Kind, process.Kind)
			}
			if !bytes.Equal(send.TraceId, process.TraceId) || !bytes.Equal(process.ParentSpanId, send.SpanId) {
				t.Errorf("process %v is not the child of send %v", process, send)
			}
			if len(process.Links) != 1 || !bytes.Equal(process.Links[0].SpanId, send.SpanId) {
				t.Errorf("process links %v", process.Links)
			}
			if send.Service != "cli-test" || send.Attr("messaging.message.id") == "" ||
				process.Attr("messaging.consumer.group.name") != "traced-sub" {
				t.Errorf("send %v %v, process %v", send.Service, send.Attributes, process.Attributes)
			}
			t.Logf("trace %s", hex.EncodeToString(send.TraceId))
		})
	}
}

// The README's first command, run as written with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver, exports the "send"
// of each input line and the "process" of its batch in one trace, with
// the plugin's "handle" span and the output's "send" in it too.
func TestReadmeFirstCommandExportsTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quickstart")
	}
	rcv := otlptest.Start(t, telemetry.ProtocolGRPC)
	line := readmeFirstCommand(t)
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_SERVICE_NAME=quickstart")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	// The command flushed its spans, and its plugins theirs, before it
	// ended.
	in, outTopic := "persistent://public/default/quickstart-in", "persistent://public/default/quickstart-out"
	byID := map[string]otlptest.Span{}
	for _, s := range rcv.Spans() {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	parent := func(s otlptest.Span) otlptest.Span {
		if s.Span == nil {
			return s
		}
		return byID[hex.EncodeToString(s.ParentSpanId)]
	}
	joined := 0
	for _, s := range rcv.Spans() {
		if s.Name != msgtrace.SendName(outTopic) {
			continue
		}
		// send out <- handle shout <- process in <- send in: one trace,
		// for the message whose trace its batch continues (the others'
		// outputs are children of their own send in).
		handle := parent(s)
		process := parent(handle)
		send := parent(process)
		if send.Span != nil && handle.Name == "handle shout" && process.Name == msgtrace.ProcessName(in) &&
			send.Name == msgtrace.SendName(in) &&
			process.Kind == tracepb.Span_SPAN_KIND_CONSUMER && send.Kind == tracepb.Span_SPAN_KIND_PRODUCER &&
			bytes.Equal(s.TraceId, send.TraceId) && bytes.Equal(process.TraceId, send.TraceId) {
			joined++
		}
	}
	if joined == 0 {
		t.Fatalf("no output's send span joins a send and a process span of its input in one trace; got %d spans:\n%v",
			len(rcv.Spans()), rcv.Spans())
	}
	t.Logf("%d outputs traced back to their input's send in one trace", joined)
}

// `streamrun run --telemetry-addr` serves /readyz (503 until the
// pipelines consume, then 200) and /metrics, whose counts follow the
// messages.
func TestRunServesTelemetry(t *testing.T) {
	bin := buildStreamrun(t)
	b := brokertest.Start(t)
	client := newClient(t, b.ServiceURL())
	in, out := fmt.Sprintf("tel-in-%d", time.Now().UnixNano()), fmt.Sprintf("tel-out-%d", time.Now().UnixNano())
	outs := collect(t, client, out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	file := writePipelineFile(t, dir, "p.yaml", taggerPipeline(t, b.ServiceURL(), in, out, "shared", 10, 1, "0s"))
	p := startProc(t, "streamrun run", dir, bin, nil, "run", "--telemetry-addr", addr, file)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	brokertest.Eventually(t, 2*time.Minute, "/readyz to answer 200", func() bool { code, _ := get("/readyz"); return code == http.StatusOK })
	publishKeyed(t, client, in, 50, 5)
	brokertest.Eventually(t, time.Minute, "50 outputs", func() bool { return outs.len() >= 50 })
	const want = `streamrun_messages_settled_total{messaging_consumer_group_name="tag",messaging_system="pulsar",streamrun_outcome="acked",streamrun_pipeline="tag"} 50`
	brokertest.Eventually(t, time.Minute, "/metrics to count 50 acked", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, want)
	})
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d after SIGINT", code)
	}
}

// A bad telemetry section is a bad file, to `streamrun run` (exit 2, the
// file and the setting named, nothing started) and `streamrun validate`.
func TestRunRefusesBadTelemetry(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ section, want string }{
		{`{traces: {endpoint: "http://c:4317", protocol: thrift}}`, `telemetry.traces: telemetry: protocol "thrift"`},
		{`{traces: {endpoint: "http://c:4317", sampler: sometimes}}`, `telemetry.traces: telemetry: sampler "sometimes"`},
		{`{http: "9464"}`, `telemetry.http: "9464": want host:port`},
	} {
		file := writePipelineFile(t, dir, "p.yaml", fmt.Sprintf(`
telemetry: %s
pipelines:
  - name: p
    source: {topics: [in], subscription: s}
    handler: {package: %s}
    outputs: [out]
`, tc.section, filepath.Join(repoRoot(t), "examples/plugins/uppercase")))
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "--memory", file}, &stdout, &stderr)
		if code != 2 || !strings.HasPrefix(stderr.String(), file+":") || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "nothing started") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", tc.section, code, stderr.String(), tc.want)
		}
		stdout.Reset()
		stderr.Reset()
		code = run(context.Background(), []string{"validate", file}, &stdout, &stderr)
		if code != 2 || !strings.HasPrefix(stderr.String(), file+":") || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("validate %s: exit %d, stderr %q; want 2 and %q", tc.section, code, stderr.String(), tc.want)
		}
	}
}

// With a collector that is away, `produce` and `consume` end within the
// flush bound at exit (2 s by default; the OTEL_* timeouts set it) and say
// so once, as a WARN in the log format asked for: every line about traces
// is a JSON record, none a plain line from OpenTelemetry's global error
// handler (consume's summary is a line of its own, as without tracing).
func TestUnreachableCollectorIsOneWarningInTheLogFormat(t *testing.T) {
	bin := buildStreamrun(t)
	cluster := brokertest.Start(t)
	topic := fmt.Sprintf("persistent://public/default/away-%d", time.Now().UnixNano())
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlptest.Unreachable(t)}
	for _, args := range [][]string{
		{"produce", "--url", cluster.ServiceURL(), "-t", topic, "-n", "10", "-m", "x", "-q", "--log-format", "json"},
		{"consume", "--url", cluster.ServiceURL(), "-t", topic, "-s", "away", "--position", "earliest", "-n", "10",
			"--log-format", "json"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s%s", args[0], err, stdout.String(), stderr.String())
		}
		warns := 0
		for line := range strings.Lines(stderr.String()) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				if strings.Contains(line, "trace") {
					t.Errorf("%s: a line about traces that is not a JSON record: %q", args[0], line)
				}
				continue
			}
			if rec["msg"] == "traces not exported" {
				warns++
				if rec["level"] != "WARN" || rec["spans_lost"] != float64(10) ||
					!strings.Contains(fmt.Sprint(rec["error"]), "not done within 2s at exit") {
					t.Errorf("%s: %v", args[0], rec)
				}
			}
		}
		if warns != 1 {
			t.Errorf("%s: %d WARN records about traces, want 1; stderr:\n%s", args[0], warns, stderr.String())
		}
	}
}
