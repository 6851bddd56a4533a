// Package otlptest is an OTLP trace receiver for tests: it listens on
// loopback over gRPC (the collector's trace service) or HTTP (POST
// /v1/traces, protobuf) and keeps every span it gets.
package otlptest

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
	"sync/atomic"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver is an OTLP trace receiver on loopback, over gRPC (the
// collector's trace service) or HTTP (POST /v1/traces, protobuf), that
// keeps every span it gets.
type Receiver struct {
	coltrace.UnimplementedTraceServiceServer
	// URL is what OTEL_EXPORTER_OTLP_ENDPOINT would say.
	URL string

	discard bool // count the spans, keep none (for benchmarks)
	count   atomic.Int64

	mu    sync.Mutex
	spans []Span
	kick  chan struct{} // a send when spans come
}

// Span is a span as received, with its resource's service.name.
type Span struct {
	*tracepb.Span
	Service string
}

func (s Span) String() string {
	return fmt.Sprintf("%q %v trace %x span %x parent %x (%s)", s.Name, s.Kind, s.TraceId, s.SpanId, s.ParentSpanId, s.Service)
}

// Attr returns the span's attribute key as a string ("" when absent).
func (s Span) Attr(key string) string { return AttrOf(s.Attributes, key) }

// AttrOf returns attribute key of kvs as a string ("" when absent).
func AttrOf(kvs []*commonpb.KeyValue, key string) string {
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

// Start starts a receiver for protocol ("grpc" or "http/protobuf") that
// stops at t's cleanup.
func Start(t testing.TB, protocol string) *Receiver {
	t.Helper()
	return start(t, protocol, "127.0.0.1:0", false)
}

// Unreachable returns the URL of a collector that is away: a loopback
// port that was free a moment ago, where connections are refused until
// StartAt listens there.
func Unreachable(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	_ = ln.Close()
	return u
}

// Silent returns the URL of a collector that takes connections and never
// answers (a hung collector, or a proxy in front of a dead one): exports
// to it end only at their deadline. It stops at t's cleanup.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held, unread, until cleanup
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// StartAt is Start on the address of url (from Unreachable): the
// collector comes back.
func StartAt(t testing.TB, protocol, url string) *Receiver {
	t.Helper()
	return start(t, protocol, strings.TrimPrefix(url, "http://"), false)
}

func start(t testing.TB, protocol, addr string, discard bool) *Receiver {
	r := &Receiver{kick: make(chan struct{}, 1), discard: discard}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.URL = "http://" + ln.Addr().String()
	switch protocol {
	case "grpc":
		var srv *grpc.Server
		if discard {
			srv = grpc.NewServer(grpc.ForceServerCodecV2(countingCodec{}))
			registerCounting(srv, r)
		} else {
			srv = grpc.NewServer()
			coltrace.RegisterTraceServiceServer(srv, r)
		}
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

// StartDiscarding is Start for a receiver that counts the spans it gets
// (Count) and keeps none: for benchmarks. Over gRPC it counts them
// without decoding the spans (see countingCodec).
func StartDiscarding(t testing.TB, protocol string) *Receiver {
	t.Helper()
	return start(t, protocol, "127.0.0.1:0", true)
}

// Count is how many spans a discarding receiver got.
func (r *Receiver) Count() int64 { return r.count.Load() }

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Changed returns a channel that receives when spans came since the last
// receive from it.
func (r *Receiver) Changed() <-chan struct{} { return r.kick }

// Export is the gRPC trace service's method.
func (r *Receiver) Export(_ context.Context, in *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.add(in)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) add(in *coltrace.ExportTraceServiceRequest) {
	if r.discard {
		for _, rs := range in.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.count.Add(int64(len(ss.Spans)))
			}
		}
		return
	}
	r.mu.Lock()
	for _, rs := range in.ResourceSpans {
		svc := ""
		if rs.Resource != nil {
			svc = AttrOf(rs.Resource.Attributes, "service.name")
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, Span{Span: s, Service: svc})
			}
		}
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// WaitFor waits until every name in names has a span in trace (hex), and
// returns the spans of that trace by name (the last of a name).
func (r *Receiver) WaitFor(ctx context.Context, traceID string, names ...string) (map[string]Span, error) {
	for {
		r.mu.Lock()
		got := map[string]Span{}
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
