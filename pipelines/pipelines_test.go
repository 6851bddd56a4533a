package pipelines_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamrun/streamrun/pipelines"
)

func valid() pipelines.Pipeline {
	return pipelines.Pipeline{
		Name:    "orders",
		Source:  pipelines.Source{Topics: []string{"orders"}, Subscription: "enrich"},
		Handler: pipelines.Handler{Plugin: "./bin/enrich"},
	}
}

func TestDefaults(t *testing.T) {
	p := valid().WithDefaults()
	want := pipelines.Pipeline{
		Name: "orders",
		Source: pipelines.Source{Topics: []string{"orders"}, Subscription: "enrich",
			Type: pipelines.Shared, InitialPosition: pipelines.Latest, ReceiverQueue: 1000},
		Handler: pipelines.Handler{Plugin: "./bin/enrich", BatchSize: 100, BatchWait: 10 * time.Millisecond,
			Instances: 1, Timeout: 30 * time.Second, MaxInFlight: 1000, MaxBatchesInFlight: 8},
		ErrorPolicy: pipelines.ErrorPolicy{MaxCrashes: 3,
			Backoff: pipelines.Backoff{Initial: time.Second, Max: time.Minute}},
		Guarantee: pipelines.AtLeastOnce,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", p, want)
	}
	q := valid()
	q.Source.Type = "Key_Shared"
	q.Handler.BatchSize, q.Handler.Instances = 500, 4
	if d := q.WithDefaults(); d.Source.Type != pipelines.KeyShared || d.Handler.MaxInFlight != 8000 || !d.Source.Type.KeepsOrder() || d.Handler.MaxBatchesInFlight != 1 {
		t.Errorf("%+v", d)
	}
}

// On Shared the default is 8 batches in flight, whatever the batch size
// (MaxInFlight bounds the messages); a value set is kept.
func TestSharedBatchesInFlightDefault(t *testing.T) {
	for _, batch := range []int{10, 100, 1000} {
		p := valid()
		p.Handler.BatchSize = batch
		if got := p.WithDefaults().Handler.MaxBatchesInFlight; got != pipelines.DefaultSharedBatchesInFlight {
			t.Errorf("batch %d: %d batches in flight, want %d", batch, got, pipelines.DefaultSharedBatchesInFlight)
		}
	}
	p := valid()
	p.Handler.MaxBatchesInFlight = 3
	if got := p.WithDefaults().Handler.MaxBatchesInFlight; got != 3 {
		t.Errorf("set to 3, defaults made it %d", got)
	}
}

// More than one batch in flight per instance would reorder a key's
// messages, so the types that keep order refuse it.
func TestMaxBatchesInFlight(t *testing.T) {
	for _, c := range []struct {
		typ  pipelines.SubscriptionType
		n    int
		fail bool
	}{
		{pipelines.Shared, 2, false}, {pipelines.Shared, 8, false}, {"", 2, false},
		{pipelines.KeyShared, 1, false}, {pipelines.KeyShared, 2, true},
		{pipelines.Failover, 2, true}, {pipelines.Exclusive, 3, true}, {pipelines.Shared, -1, true},
	} {
		p := valid()
		p.Source.Type, p.Handler.MaxBatchesInFlight = c.typ, c.n
		err := p.Validate()
		if (err != nil) != c.fail {
			t.Errorf("%s, %d: Validate = %v", c.typ, c.n, err)
		}
		if err != nil && !strings.Contains(err.Error(), "handler.max_batches_in_flight") {
			t.Errorf("%s, %d: the error does not name the field: %v", c.typ, c.n, err)
		}
	}
}

func TestBackoff(t *testing.T) {
	b := pipelines.Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, b.Delay(n))
	}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v", got)
		}
	}
	if d := (pipelines.Backoff{}).Delay(1); d != time.Second {
		t.Errorf("default first delay %v", d)
	}
}

// Every problem is reported, each naming its field.
func TestValidate(t *testing.T) {
	p := valid()
	if err := p.Validate(); err != nil {
		t.Fatalf("valid pipeline: %v", err)
	}
	bad := pipelines.File{Pipelines: []pipelines.Pipeline{
		{
			Name: "bad name!",
			Source: pipelines.Source{Topics: []string{"persistent://a b/c/d"}, Pattern: "(", Type: "roundrobin",
				InitialPosition: "middle", Rewind: "yesterday", ReceiverQueue: -1},
			Handler: pipelines.Handler{Plugin: "x", Package: "y", BatchSize: -1, Timeout: -time.Second,
				Env: map[string]string{"A=B": "c"}},
			Outputs:     []string{""},
			ErrorPolicy: pipelines.ErrorPolicy{MaxRetries: -1, DeadLetterTopic: "a/b"},
		},
		valid(), valid(),
	}}
	err := bad.Validate()
	var paths []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *pipelines.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("%v is not a FieldError", e)
		}
		paths = append(paths, fe.Path)
	}
	for _, want := range []string{
		"pipelines[0].name", "pipelines[0].source", "pipelines[0].source.topics[0]", "pipelines[0].source.pattern",
		"pipelines[0].source.subscription", "pipelines[0].source.type", "pipelines[0].source.initial_position",
		"pipelines[0].source.rewind", "pipelines[0].source.receiver_queue", "pipelines[0].handler",
		"pipelines[0].handler.env", "pipelines[0].handler.batch_size", "pipelines[0].handler.timeout",
		"pipelines[0].outputs[0]", "pipelines[0].error_policy.max_retries", "pipelines[0].error_policy.dead_letter_topic",
		"pipelines[2].name",
	} {
		found := false
		for _, p := range paths {
			found = found || p == want
		}
		if !found {
			t.Errorf("no error for %s in:\n%v", want, err)
		}
	}
	for _, r := range []string{"earliest", "latest", "12:34:-1", "12:34:-1:5", "2025-06-01T12:00:00Z"} {
		p := valid()
		p.Source.Rewind = r
		if err := p.Validate(); err != nil {
			t.Errorf("rewind %q: %v", r, err)
		}
	}
	p = valid()
	p.Source.Topics = append(p.Source.Topics, "more")
	p.Source.Rewind = "12:34:-1"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "exactly one topic") {
		t.Errorf("rewind to an id with two topics: %v", err)
	}
}

// A pattern is checked as subscribe checks it: a tenant or namespace
// that is not literal passed a plain regexp compile but fails at start.
func TestValidatePatternNamespaceIsLiteral(t *testing.T) {
	p := valid()
	p.Source.Topics = nil
	p.Source.Pattern = "persistent://public/default/orders-.*"
	if err := p.Validate(); err != nil {
		t.Fatalf("pattern in one namespace: %v", err)
	}
	p.Source.Pattern = "persistent://pub.*/default/x"
	err := p.Validate()
	var fe *pipelines.FieldError
	if !errors.As(err, &fe) || fe.Path != "source.pattern" || !strings.Contains(err.Error(), "literal") {
		t.Fatalf("pattern with a non-literal tenant: %v", err)
	}
}

// Keyed state runs on an Exclusive subscription only, and each other
// type is refused at source.type saying why; state settings without
// enabled are refused too, and the changelog's default is named after
// the subscription in the source's namespace.
func TestValidateKeyedState(t *testing.T) {
	p := valid()
	p.Source.Topics = []string{"persistent://shop/eu/payments"}
	p.Source.Type = pipelines.Exclusive
	p.State = pipelines.State{Enabled: true}
	if err := p.Validate(); err != nil {
		t.Fatalf("keyed state on Exclusive: %v", err)
	}
	if got, want := p.ChangelogTopic(), "persistent://shop/eu/"+p.Source.Subscription+"-state"; got != want {
		t.Errorf("changelog %q, want %q", got, want)
	}
	for typ, words := range map[pipelines.SubscriptionType]string{
		"": "on Shared", pipelines.Shared: "on Shared", pipelines.Failover: "moves keys", pipelines.KeyShared: "moves keys",
	} {
		p.Source.Type = typ
		err := p.Validate()
		var fe *pipelines.FieldError
		if !errors.As(err, &fe) || fe.Path != "source.type" || !strings.Contains(err.Error(), words) {
			t.Errorf("keyed state on %q: %v, want an error at source.type saying %q", typ, err, words)
		}
	}
	p.Source.Type = pipelines.Exclusive
	p.State = pipelines.State{Changelog: "counts"}
	var fe *pipelines.FieldError
	if err := p.Validate(); !errors.As(err, &fe) || fe.Path != "state.enabled" {
		t.Errorf("state settings without enabled: %v", err)
	}
	p.State = pipelines.State{Enabled: true}
	p.Guarantee = pipelines.ExactlyOnce
	if err := p.Validate(); err != nil {
		t.Errorf("keyed state with exactly_once: %v", err)
	}
	p.Guarantee = ""
	// A key set before the handler, on several instances: refused at the
	// step's key (TestAKeyMappedBeforeKeyedStateOnSeveralInstancesIsRefused).
	p.Steps = []pipelines.Step{{Map: &pipelines.MapStep{Key: `"all"`}}}
	p.Handler.Instances = 3
	if err := p.Validate(); !errors.As(err, &fe) || fe.Path != "steps[0].map.key" || !strings.Contains(err.Error(), "3 instances") {
		t.Errorf("a key mapped before keyed state on 3 instances: %v", err)
	}
	p.Handler.Instances = 1
	if err := p.Validate(); err != nil {
		t.Errorf("a key mapped before keyed state on one instance: %v", err)
	}
	p.Steps = nil
	p.State = pipelines.State{Enabled: true, Changelog: "persistent://a/b"}
	if err := p.Validate(); !errors.As(err, &fe) || fe.Path != "state.changelog" {
		t.Errorf("a bad changelog topic: %v", err)
	}
}
