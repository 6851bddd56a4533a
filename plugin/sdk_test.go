package plugin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin/internal/contract"
)

// These tests run handlers in this process (ProcessLocal), with the same
// code the plugin process runs them with.

func TestAMessageFuncErrorPicksTheOutcome(t *testing.T) {
	h := MessageFunc(func(_ context.Context, m *Message) ([]Output, error) {
		switch string(m.Payload) {
		case "dlq":
			return []Output{{Topic: "lost"}}, DeadLetter(errors.New("cannot parse"))
		case "later":
			return nil, RetryAfter(2*time.Second, errors.New("rate limited"))
		case "drop":
			return nil, Drop("heartbeat")
		case "plain":
			return nil, errors.New("flaky")
		case "wrapped":
			return nil, errors.Join(errors.New("ctx"), DeadLetter(errors.New("bad")))
		}
		return []Output{{Topic: "out", Payload: m.Payload}, {Topic: "audit", Payload: m.Payload}}, nil
	})
	res, err := ProcessLocal(context.Background(), h, msgs("ok", "dlq", "later", "drop", "plain", "wrapped"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Outcome: OutcomeAck},
		{Outcome: OutcomeDeadLetter, Reason: "cannot parse"},
		{Outcome: OutcomeRetry, RetryDelay: 2 * time.Second, Reason: "rate limited"},
		{Outcome: OutcomeDrop, Reason: "heartbeat"},
		{Outcome: OutcomeRetry, Reason: "flaky"},
		{Outcome: OutcomeDeadLetter, Reason: "ctx\nbad"},
	}
	for i, w := range want {
		r := res[i]
		if r.Outcome != w.Outcome || r.RetryDelay != w.RetryDelay || r.Reason != w.Reason {
			t.Errorf("message %d: %+v, want %+v", i, r, w)
		}
	}
	if len(res[0].Outputs) != 2 || res[0].Outputs[1].Topic != "audit" {
		t.Errorf("ack lost its outputs: %+v", res[0])
	}
	if len(res[1].Outputs) != 0 {
		t.Errorf("a dead letter kept its outputs: %+v", res[1])
	}
}

func TestMessageFuncStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	h := MessageFunc(func(context.Context, *Message) ([]Output, error) {
		calls++
		cancel()
		return nil, nil
	})
	res, err := ProcessLocal(ctx, h, msgs("a", "b", "c"))
	if err != nil || calls != 1 {
		t.Fatalf("%v after %d calls", err, calls)
	}
	for i, r := range res {
		if r.Outcome != OutcomeRetry || r.Reason != "batch failed: context canceled" {
			t.Errorf("message %d: %+v", i, r)
		}
	}
}

func TestJSONDecodesAndEncodes(t *testing.T) {
	type in struct{ N int }
	type out struct {
		Double int `json:"double"`
	}
	h := JSON(func(_ context.Context, v in, m *Message) ([]Emit[out], error) {
		if v.N < 0 {
			return nil, Drop("negative")
		}
		return []Emit[out]{{Topic: "t", Key: m.Key, Properties: map[string]string{"n": "1"}, Value: out{2 * v.N}}}, nil
	})
	res, err := ProcessLocal(context.Background(), h, msgs(`{"N":21}`, `{"N":-1}`, `[1,2]`))
	if err != nil {
		t.Fatal(err)
	}
	if o := res[0].Outputs; len(o) != 1 || string(o[0].Payload) != `{"double":42}` || o[0].Key != "k0" || o[0].Properties["n"] != "1" {
		t.Errorf("ok: %+v", res[0])
	}
	if res[1].Outcome != OutcomeDrop {
		t.Errorf("drop: %+v", res[1])
	}
	if r := res[2]; r.Outcome != OutcomeDeadLetter || !strings.HasPrefix(r.Reason, "decode payload as plugin.in: json: cannot unmarshal array") {
		t.Errorf("bad payload: %+v", r)
	}

	// A value that cannot be encoded is dead-lettered too.
	bad := JSON(func(context.Context, in, *Message) ([]Emit[chan int], error) {
		return []Emit[chan int]{{Topic: "t", Value: make(chan int)}}, nil
	})
	res, _ = ProcessLocal(context.Background(), bad, msgs(`{}`))
	if r := res[0]; r.Outcome != OutcomeDeadLetter || !strings.Contains(r.Reason, "encode output 0 for t") {
		t.Errorf("unencodable: %+v", r)
	}
}

func TestConfigureDecodesStrictly(t *testing.T) {
	type cfg struct {
		Topic string `json:"topic"`
		Limit int    `json:"limit"`
	}
	var got cfg
	closed := false
	h := Configure(func(_ context.Context, c cfg) (Handler, error) {
		got = c
		if c.Limit < 0 {
			return nil, errors.New("limit must not be negative")
		}
		return closerFunc{HandlerFunc(func(context.Context, ResultWriter, []*Message) error { return nil }), &closed}, nil
	})
	init := h.(Initializer)
	ctx := context.Background()
	if _, err := ProcessLocal(ctx, h, msgs("x")); err != nil {
		t.Fatal(err)
	}
	if res, _ := ProcessLocal(ctx, h, msgs("x")); res[0].Reason != "batch failed: Process before a successful Init" {
		t.Errorf("before Init: %+v", res[0])
	}
	for _, tc := range []struct{ config, err string }{
		{`{"topic":"a","limt":3}`, `config: json: unknown field "limt"`},
		{`{"topic":7}`, "config: json: cannot unmarshal number into Go struct field cfg.topic of type string"},
		{`{"limit":-1}`, "limit must not be negative"},
	} {
		if err := init.Init(ctx, Info{Config: []byte(tc.config)}); err == nil || err.Error() != tc.err {
			t.Errorf("config %s: %v, want %s", tc.config, err, tc.err)
		}
	}
	for _, empty := range []string{"", "null", "  "} {
		got = cfg{Topic: "stale"}
		if err := init.Init(ctx, Info{Config: []byte(empty)}); err != nil || got != (cfg{}) {
			t.Errorf("config %q: %v, %+v", empty, err, got)
		}
	}
	if err := init.Init(ctx, Info{Config: []byte(`{"topic":"a","limit":3}`)}); err != nil || got != (cfg{"a", 3}) {
		t.Fatalf("%v, %+v", err, got)
	}
	if err := h.(Closer).Close(ctx); err != nil || !closed {
		t.Errorf("Close did not reach the built handler: %v", err)
	}
}

type closerFunc struct {
	Handler
	closed *bool
}

func (c closerFunc) Close(context.Context) error { *c.closed = true; return nil }

func TestTheResultWriterIsSafeForConcurrentUse(t *testing.T) {
	batch := msgs(make([]string, 200)...)
	h := HandlerFunc(func(_ context.Context, w ResultWriter, batch []*Message) error {
		var wg sync.WaitGroup
		for _, m := range batch {
			wg.Go(func() {
				w.Output(m, Output{Topic: "a"})
				w.Output(m, Output{Topic: "b"})
				if m.Index()%2 == 1 {
					w.Drop(m, "odd")
				}
			})
		}
		wg.Wait()
		return nil
	})
	res, err := ProcessLocal(context.Background(), h, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if i%2 == 0 && (r.Outcome != OutcomeAck || len(r.Outputs) != 2) || i%2 == 1 && (r.Outcome != OutcomeDrop || r.Outputs != nil) {
			t.Fatalf("message %d: %+v", i, r)
		}
	}
}

func TestWritesAfterProcessReturnsAreIgnored(t *testing.T) {
	var late ResultWriter
	var first *Message
	h := HandlerFunc(func(_ context.Context, w ResultWriter, batch []*Message) error {
		late, first = w, batch[0]
		return nil
	})
	res, _ := ProcessLocal(context.Background(), h, msgs("a"))
	late.DeadLetter(first, "too late")
	late.Output(first, Output{Topic: "x"})
	if res[0].Outcome != OutcomeAck || len(res[0].Outputs) != 0 {
		t.Errorf("a late write changed the result: %+v", res[0])
	}
}

func TestALocalPanicIsAPanicErrorNamingTheMessage(t *testing.T) {
	h := MessageFunc(func(_ context.Context, m *Message) ([]Output, error) {
		if string(m.Payload) == "boom" {
			panic("boom")
		}
		return nil, nil
	})
	_, err := ProcessLocal(context.Background(), h, msgs("a", "b", "boom"))
	var p *PanicError
	if !errors.As(err, &p) || p.Index != 2 || p.MessageID != "7:2:-1:-1" || p.Value != "boom" || p.Stack == "" {
		t.Fatalf("%v (%+v)", err, p)
	}
	if err.Error() != "handler panicked on message 2 (7:2:-1:-1): boom" {
		t.Errorf("error text %q", err)
	}
	// A batch handler's panic names no message.
	_, err = ProcessLocal(context.Background(), HandlerFunc(func(context.Context, ResultWriter, []*Message) error {
		panic(errors.New("batch boom"))
	}), msgs("a"))
	if !errors.As(err, &p) || p.Index != -1 || p.Value != "batch boom" {
		t.Fatalf("%v (%+v)", err, p)
	}
}

func TestTheSDKsConstantsAreTheContracts(t *testing.T) {
	if ContractVersion != contract.Version || DefaultMaxMessageSize != contract.DefaultMaxMessageSize {
		t.Fatalf("ContractVersion %d, DefaultMaxMessageSize %d; the contract's are %d and %d",
			ContractVersion, DefaultMaxMessageSize, contract.Version, contract.DefaultMaxMessageSize)
	}
}

func TestOutcomeNames(t *testing.T) {
	for o, want := range map[Outcome]string{OutcomeAck: "ack", OutcomeRetry: "retry", OutcomeDeadLetter: "dead-letter", OutcomeDrop: "drop", 9: "Outcome(9)"} {
		if o.String() != want {
			t.Errorf("%d: %s", int(o), o)
		}
	}
}
