package telemetry_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receiver is an OTLP trace receiver on loopback, over gRPC (the
// collector's trace service) or HTTP (POST /v1/traces, protobuf), that
// keeps every span it gets.
type receiver struct {
	coltrace.UnimplementedTraceServiceServer
	url string // what OTEL_EXPORTER_OTLP_ENDPOINT would say

	mu    sync.Mutex
	spans []gotSpan
	kick  chan struct{}
}

// gotSpan is a span as received, with its resource's service.name.
type gotSpan struct {
	*tracepb.Span
	service string
}

func (s gotSpan) String() string {
	return fmt.Sprintf("%q %v trace %x span %x parent %x (%s)", s.Name, s.Kind, s.TraceId, s.SpanId, s.ParentSpanId, s.service)
}

// attr returns the span's attribute key as a string ("" when absent).
func (s gotSpan) attr(key string) string { return attrOf(s.Attributes, key) }

func attrOf(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		}
	}
	return ""
}

func startReceiver(t *testing.T, protocol string) *receiver {
	t.Helper()
	r := &receiver{kick: make(chan struct{}, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String()
	switch protocol {
	case "grpc":
		srv := grpc.NewServer()
		coltrace.RegisterTraceServiceServer(srv, r)
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Stop(); <-done })
	default:
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
			b, err := io.ReadAll(req.Body)
			var in coltrace.ExportTraceServiceRequest
			if err == nil {
				err = proto.Unmarshal(b, &in)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.add(&in)
			out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(out)
		})
		srv := &http.Server{Handler: mux}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close(); <-done })
	}
	return r
}

func (r *receiver) Export(_ context.Context, in *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.add(in)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (r *receiver) add(in *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	for _, rs := range in.ResourceSpans {
		svc := ""
		if rs.Resource != nil {
			svc = attrOf(rs.Resource.Attributes, "service.name")
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, gotSpan{Span: s, service: svc})
			}
		}
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// waitFor waits until every name in names has a span in trace (hex), and
// returns the spans of that trace by name (the last of a name).
func (r *receiver) waitFor(ctx context.Context, traceID string, names ...string) (map[string]gotSpan, error) {
	for {
		r.mu.Lock()
		got := map[string]gotSpan{}
		for _, s := range r.spans {
			if hex.EncodeToString(s.TraceId) == traceID {
				got[s.Name] = s
			}
		}
		var missing []string
		for _, n := range names {
			if _, ok := got[n]; !ok {
				missing = append(missing, n)
			}
		}
		all := fmt.Sprint(r.spans)
		r.mu.Unlock()
		if len(missing) == 0 {
			return got, nil
		}
		select {
		case <-r.kick:
		case <-ctx.Done():
			return got, errors.New("spans " + strings.Join(missing, ", ") + " of trace " + traceID + " never came; got " + all)
		}
	}
}
