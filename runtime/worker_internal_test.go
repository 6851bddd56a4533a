package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
)

// testWorker runs a worker over fs's instances with limit batches in
// flight until its queue is closed; stop is the hard stop.
type testWorker struct {
	w    *worker
	q    chan *batch
	rec  *recorder
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func startWorker(t *testing.T, fs *fakes, limit int, opts ...func(*worker)) *testWorker {
	t.Helper()
	s, stop := testSupervisor(t, fs)
	abort, cancel := context.WithCancel(context.Background())
	tw := &testWorker{q: make(chan *batch, 16), rec: &recorder{}, stop: stop}
	tw.w = &worker{
		id: 0, sup: s, out: tw.rec, log: discard(),
		limit: limit, timeout: 5 * time.Second, maxCrashes: 3,
		hard: s.stop, abort: abort.Done(), order: make(chan *sent, limit),
	}
	for _, o := range opts {
		o(tw.w)
	}
	q := tw.q
	tw.wg.Go(func() { tw.w.run(q) })
	tw.wg.Go(tw.w.publish)
	t.Cleanup(func() {
		tw.close()
		cancel()
		s.close(context.Background())
	})
	return tw
}

// close closes the queue and waits for the worker to finish.
func (tw *testWorker) close() {
	if tw.q != nil {
		close(tw.q)
		tw.q = nil
	}
	tw.wg.Wait()
}

func (tw *testWorker) send(its []*item) {
	b := &batch{items: its, size: len(its)}
	tw.q <- b
}

// Answers that come out of order are settled in the order the batches
// were sent.
func TestWorkerSettlesInBatchOrder(t *testing.T) {
	first := make(chan struct{})
	fs := &fakes{mk: func(int) *fakeInstance {
		return &fakeInstance{process: func(ctx context.Context, batch []*plugin.Message) ([]plugin.Result, error) {
			if batch[0].ID == "a-0" {
				<-first // answered only after b
			} else {
				defer close(first)
			}
			return ackAll(batch), nil
		}}
	}}
	tw := startWorker(t, fs, 2)
	tw.send(items("a", 2))
	tw.send(items("b", 2))
	tw.close()
	if want := []string{"a-0", "a-1", "b-0", "b-1"}; !slices.Equal(tw.rec.settled, want) {
		t.Errorf("settled %v, want %v", tw.rec.settled, want)
	}
}

// A batch whose instance crashes is retried whole on a fresh instance;
// every message is settled once, nothing dead-lettered.
func TestWorkerRetriesACrashedBatchOnAFreshInstance(t *testing.T) {
	fs := &fakes{mk: func(n int) *fakeInstance {
		f := &fakeInstance{}
		if n == 0 {
			f.process = func(context.Context, []*plugin.Message) ([]plugin.Result, error) {
				return nil, fmt.Errorf("call: %w", host.ErrCrashed)
			}
		}
		return f
	}}
	tw := startWorker(t, fs, 1)
	tw.send(items("a", 3))
	tw.send(items("b", 3))
	tw.close()
	if want := []string{"a-0", "a-1", "a-2", "b-0", "b-1", "b-2"}; !slices.Equal(tw.rec.settled, want) || len(tw.rec.dead) != 0 {
		t.Errorf("settled %v, dead %v", tw.rec.settled, tw.rec.dead)
	}
	if fs.count() != 2 || fs.get(1).calls.Load() != 2 {
		t.Errorf("%d instances started", fs.count())
	}
}

// A message that crashes every instance is dead-lettered after
// MaxCrashes tries; the rest of its batch is settled.
func TestWorkerDeadLettersAPoisonMessage(t *testing.T) {
	fs := &fakes{mk: func(int) *fakeInstance {
		return &fakeInstance{process: func(_ context.Context, batch []*plugin.Message) ([]plugin.Result, error) {
			for i, m := range batch {
				if m.ID == "a-1" {
					return nil, &host.CrashError{Index: i, Panic: "poison"}
				}
			}
			return ackAll(batch), nil
		}}
	}}
	tw := startWorker(t, fs, 1)
	tw.send(items("a", 3))
	tw.close()
	if want := []string{"a-0", "a-2"}; !slices.Equal(tw.rec.settled, want) {
		t.Errorf("settled %v, want %v", tw.rec.settled, want)
	}
	if _, ok := tw.rec.dead["a-1"]; !ok || len(tw.rec.dead) != 1 {
		t.Errorf("dead %v", tw.rec.dead)
	}
}

// At the hard stop what is not answered is handed back, not settled.
func TestWorkerHandsBackAtTheHardStop(t *testing.T) {
	in := make(chan struct{})
	fs := &fakes{mk: func(int) *fakeInstance {
		return &fakeInstance{process: func(ctx context.Context, batch []*plugin.Message) ([]plugin.Result, error) {
			close(in)
			<-ctx.Done()
			return nil, ctx.Err()
		}}
	}}
	tw := startWorker(t, fs, 1)
	tw.send(items("a", 2))
	<-in
	tw.send(items("b", 1))
	tw.stop()
	tw.close()
	slices.Sort(tw.rec.back)
	if want := []string{"a-0", "a-1", "b-0"}; !slices.Equal(tw.rec.back, want) || len(tw.rec.settled) != 0 {
		t.Errorf("handed back %v, settled %v", tw.rec.back, tw.rec.settled)
	}
}

// An instance that exits while it has nothing to do is restarted at once.
func TestWorkerRestartsAnInstanceThatDiesIdle(t *testing.T) {
	fs := &fakes{}
	tw := startWorker(t, fs, 1)
	fs.get(0).exit()
	brokertest.Eventually(t, 10*time.Second, "a second instance", func() bool { return fs.count() == 2 })
	ih, _, _ := tw.w.sup.health(time.Now())
	if ih.Restarts != 1 || !ih.Up || ih.Pid != 101 {
		t.Errorf("health %+v", ih)
	}
	if !strings.Contains(ih.LastError, "exited between batches") {
		t.Errorf("last error %q", ih.LastError)
	}
}

// A batch whose crash was its message's last (dead-lettered at once) leaves
// the slot without an instance; with nothing more queued the worker starts
// the next one at once, so the slot is up and the restart counted before
// another batch comes.
func TestWorkerRestartsAfterACrashWithNothingLeft(t *testing.T) {
	fs := &fakes{mk: func(n int) *fakeInstance {
		f := &fakeInstance{}
		if n == 0 {
			f.process = func(_ context.Context, batch []*plugin.Message) ([]plugin.Result, error) {
				return nil, &host.CrashError{Index: 0, Panic: "poison"}
			}
		}
		return f
	}}
	tw := startWorker(t, fs, 1, func(w *worker) { w.maxCrashes = 1 })
	tw.send(items("a", 1))
	brokertest.Eventually(t, 10*time.Second, "a-0 dead-lettered", func() bool { return tw.rec.deadCount() == 1 })
	brokertest.Eventually(t, 10*time.Second, "a second instance, with no batch waiting", func() bool { return fs.count() == 2 })
	brokertest.Eventually(t, 10*time.Second, "the slot up and its restart counted", func() bool {
		ih, _, _ := tw.w.sup.health(time.Now())
		return ih.Up && ih.Restarts == 1
	})
}
