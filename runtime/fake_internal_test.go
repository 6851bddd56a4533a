package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/steps"
	"github.com/streamrun/streamrun/subscribe"
)

// The in-package tests run the supervisor, the dispatcher and the
// bisection against fakes: an instance that answers as a test says, and
// a sink that records what became of each message. No broker, no plugin
// process.

// fakeInstance is an instance whose calls answer with process (every
// message acked when nil).
type fakeInstance struct {
	pid     int
	process func(ctx context.Context, batch []*plugin.Message) ([]plugin.Result, error)
	exited  chan struct{}
	exitMu  sync.Once
	closed  atomic.Bool
	killed  atomic.Bool
	calls   atomic.Int64
}

// ProcessBatch hands process the batch's messages with their test names
// as ids (name).
func (f *fakeInstance) ProcessBatch(ctx context.Context, b host.Batch) ([]plugin.Result, error) {
	f.calls.Add(1)
	its := b.(callBatch)
	batch := make([]*plugin.Message, len(its))
	for i, it := range its {
		batch[i] = &plugin.Message{ID: name(it)}
	}
	if f.process != nil {
		return f.process(ctx, batch)
	}
	return ackAll(batch), nil
}

func (f *fakeInstance) Close(context.Context) error { f.closed.Store(true); f.exit(); return nil }
func (f *fakeInstance) Kill()                       { f.killed.Store(true); f.exit() }
func (f *fakeInstance) Pid() int                    { return f.pid }
func (f *fakeInstance) Exited() <-chan struct{}     { return f.exited }
func (f *fakeInstance) ExitStatus() string          { return "exit status 3" }
func (f *fakeInstance) exit()                       { f.exitMu.Do(func() { close(f.exited) }) }

func ackAll(batch []*plugin.Message) []plugin.Result {
	res := make([]plugin.Result, len(batch))
	for i := range res {
		res[i].Outcome = plugin.OutcomeAck
	}
	return res
}

// fakes starts fakeInstances, numbered from pid 100, each made by mk
// (nil: one that acks all); fail makes the next starts fail.
type fakes struct {
	mu    sync.Mutex
	all   []*fakeInstance
	mk    func(n int) *fakeInstance
	fail  int
	start chan int // told each pid started, if not nil
}

func (fs *fakes) starter(ctx context.Context, slot int) (instance, error) {
	fs.mu.Lock()
	if fs.fail > 0 {
		fs.fail--
		fs.mu.Unlock()
		return nil, errors.New("no such binary")
	}
	n := len(fs.all)
	var f *fakeInstance
	if fs.mk != nil {
		f = fs.mk(n)
	} else {
		f = &fakeInstance{}
	}
	f.pid = 100 + n
	f.exited = make(chan struct{})
	fs.all = append(fs.all, f)
	ch := fs.start
	fs.mu.Unlock()
	if ch != nil {
		ch <- f.pid
	}
	return f, nil
}

func (fs *fakes) get(i int) *fakeInstance {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.all[i]
}

func (fs *fakes) count() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.all)
}

// quickRestarts restart at once, so the tests do not wait.
var quickRestarts = RestartPolicy{Initial: time.Microsecond, Max: time.Millisecond, DegradedAfter: 3, DegradedWindow: time.Minute}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testSupervisor is a supervisor of fs's instances, its first one
// started; cancel is the hard stop.
func testSupervisor(t *testing.T, fs *fakes) (*supervisor, context.CancelFunc) {
	t.Helper()
	stop, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := newSupervisor(0, fs.starter, quickRestarts, time.Second, stop, discard())
	if err := s.startFirst(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, cancel
}

// recorder is a sink that records what became of each message.
type recorder struct {
	mu      sync.Mutex
	settled []string // ids, in the order settled
	dead    map[string]string
	back    []string
	// kept out by steps
	filteredOut, droppedOut []string
}

func (r *recorder) calling(ctx context.Context, _ *batch, _ int) context.Context { return ctx }

func (r *recorder) called(*batch, int, int, time.Duration, error) {}

func (r *recorder) settle(items []*item, res []plugin.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range items {
		r.settled = append(r.settled, name(it))
	}
}

func (r *recorder) deadLetter(it *item, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead == nil {
		r.dead = map[string]string{}
	}
	r.dead[name(it)] = reason
}

func (r *recorder) caughtUp() {}

func (r *recorder) filtered(it *item, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.filteredOut = append(r.filteredOut, name(it))
}

func (r *recorder) dropped(it *item, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.droppedOut = append(r.droppedOut, name(it))
}

func (r *recorder) stepsRan(*batch, int, *steps.Chain, []steps.Counts) {}

func (r *recorder) handBack(it *item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.back = append(r.back, name(it))
}

// items makes n items named prefix-0 ... prefix-(n-1) (name).
func items(prefix string, n int) []*item {
	out := make([]*item, n)
	for i := range out {
		out[i] = &item{m: &subscribe.Message{Topic: prefix,
			ID: pulsarwire.MessageID{Entry: uint64(i), Partition: -1, BatchIndex: -1}}}
	}
	return out
}

// name is the name items gave it.
func name(it *item) string { return fmt.Sprintf("%s-%d", it.m.Topic, it.m.ID.Entry) }

func ids(its []*item) []string {
	var out []string
	for _, it := range its {
		out = append(out, name(it))
	}
	return out
}

// deadCount is how many messages were dead-lettered so far.
func (r *recorder) deadCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.dead)
}
