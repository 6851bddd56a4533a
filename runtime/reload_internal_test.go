package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/pipelines"
)

// What a reload does to a pipeline follows from which fields changed.
func TestDiffSaysWhatAReloadChanges(t *testing.T) {
	base := pipelines.Pipeline{
		Name:    "p",
		Source:  pipelines.Source{Topics: []string{"in"}, Subscription: "s"},
		Handler: pipelines.Handler{Plugin: "/bin/h", Config: map[string]any{"output": "out", "n": 1}},
		Outputs: []string{"out"},
	}.WithDefaults()
	id := handlerID{path: "/bin/h", hash: "aa"}
	for _, tc := range []struct {
		name string
		edit func(p *pipelines.Pipeline)
		id   handlerID
		want change
	}{
		{"nothing", func(*pipelines.Pipeline) {}, id, change{}},
		{"the binary's content", func(*pipelines.Pipeline) {}, handlerID{path: "/bin/h", hash: "bb"}, change{handler: true}},
		{"the binary's path", func(p *pipelines.Pipeline) { p.Handler.Plugin = "/bin/h2" }, handlerID{path: "/bin/h2", hash: "aa"}, change{handler: true}},
		{"the config", func(p *pipelines.Pipeline) { p.Handler.Config = map[string]any{"output": "out", "n": 2} }, id, change{handler: true}},
		{"the env", func(p *pipelines.Pipeline) { p.Handler.Env = map[string]string{"A": "b"} }, id, change{handler: true}},
		{"the batch size", func(p *pipelines.Pipeline) { p.Handler.BatchSize = 10 }, id, change{flow: true}},
		{"the instances", func(p *pipelines.Pipeline) { p.Handler.Instances = 3 }, id, change{flow: true}},
		{"the timeout", func(p *pipelines.Pipeline) { p.Handler.Timeout = time.Second }, id, change{flow: true}},
		{"the messages in flight", func(p *pipelines.Pipeline) { p.Handler.MaxInFlight = 5000 }, id, change{flow: true}},
		{"the batches in flight", func(p *pipelines.Pipeline) { p.Handler.MaxBatchesInFlight = 4 }, id, change{flow: true}},
		{"the steps", func(p *pipelines.Pipeline) { p.Steps = []pipelines.Step{{Filter: "true"}} }, id, change{flow: true}},
		{"the dead-letter topic", func(p *pipelines.Pipeline) { p.ErrorPolicy.DeadLetterTopic = "dlq" }, id, change{flow: true}},
		{"the args", func(p *pipelines.Pipeline) { p.Handler.Args = []string{"-v"} }, id, change{handler: true}},
		{"the outputs", func(p *pipelines.Pipeline) { p.Outputs = []string{"out", "more"} }, id, change{flow: true}},
		{"the error policy", func(p *pipelines.Pipeline) { p.ErrorPolicy.MaxRetries = 5 }, id, change{flow: true}},
		{"the subscription", func(p *pipelines.Pipeline) { p.Source.Subscription = "t" }, id, change{source: true}},
		{"the receiver queue", func(p *pipelines.Pipeline) { p.Source.ReceiverQueue = 10 }, id, change{source: true}},
		{"an empty list for none", func(p *pipelines.Pipeline) { p.Handler.Args = []string{} }, id, change{}},
		{"batch size and binary", func(p *pipelines.Pipeline) { p.Handler.BatchSize = 10 }, handlerID{path: "/bin/h", hash: "cc"}, change{handler: true, flow: true}},
	} {
		next := base
		next.Handler.Config = map[string]any{"output": "out", "n": 1}
		tc.edit(&next)
		if got := diff(base, next, id, tc.id); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A replaced instance finishes the calls it has before it is closed; new
// calls go to the new one at once.
func TestSupervisorReplaceLetsTheOldInstanceFinish(t *testing.T) {
	fs := &fakes{}
	s, _ := testSupervisor(t, fs)
	inFlight, err := s.acquire()
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := fs.starter(context.Background(), 0)
	replaced := make(chan int)
	go func() { replaced <- s.replace(context.Background(), fs.starter, fresh) }()
	brokertest.Eventually(t, 10*time.Second, "the new instance in the slot", func() bool {
		l, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		s.release(l, nil)
		return l.inst() == fresh
	})
	select {
	case pid := <-replaced:
		t.Fatalf("the old instance (%d) was closed with a call in flight", pid)
	case <-time.After(50 * time.Millisecond):
	}
	if fs.get(0).closed.Load() {
		t.Fatal("closed with a call in flight")
	}
	// The old call fails after the swap: not the new instance's failure.
	if s.release(inFlight, context.DeadlineExceeded) {
		t.Error("a failure of the replaced instance counted against the slot")
	}
	if pid := <-replaced; pid != 100 || !fs.get(0).closed.Load() {
		t.Errorf("replace returned %d; old closed %v", pid, fs.get(0).closed.Load())
	}
	ih, _, _ := s.health(time.Now())
	if ih.Swaps != 1 || ih.Restarts != 0 || ih.Pid != fresh.Pid() || !ih.Up || ih.LastError != "" {
		t.Errorf("health after the swap: %+v", ih)
	}
}
