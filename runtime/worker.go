package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/steps"
)

// errHung is the failure of a batch the handler did not answer within
// the pipeline's timeout.
var errHung = errors.New("handler did not answer in time")

// sink is where a worker's results go: the pipeline, which publishes,
// acknowledges, retries, dead-letters and hands back, and which is told
// of every call (for hooks, metrics and traces).
type sink interface {
	// calling is the context of a call of b's messages to an instance,
	// made from ctx (the pipeline's hard stop).
	calling(ctx context.Context, b *batch, instance int) context.Context
	// called is told how a call of size messages of b went.
	called(b *batch, instance, size int, took time.Duration, err error)
	// settle acts on the handler's answers for items.
	settle(items []*item, res []plugin.Result)
	// deadLetter gives up on it for reason.
	deadLetter(it *item, reason string)
	// handBack leaves it unsettled for the broker to deliver again (only
	// at the hard stop).
	handBack(it *item)
	// caughtUp is told that a publisher has settled every batch sent to
	// it so far.
	caughtUp()
	// filtered acknowledges it, which filter step name kept out.
	filtered(it *item, name string)
	// dropped acknowledges it, on which a step's expression failed (err)
	// where the step says drop.
	dropped(it *item, err error)
	// stepsRan is told what each step of c did with a part of b
	// (instance is the worker's slot).
	stepsRan(b *batch, instance int, c *steps.Chain, counts []steps.Counts)
}

// worker is the dispatcher of one instance slot: it feeds the slot's
// instance batches, up to limit at once, each on a goroutine of its own
// while it is out, gets every message of each an answer through crashes
// and hangs (the supervisor restarts the instance; afterFailure finds
// poison messages), and settles the answers in the order the batches
// were sent.
type worker struct {
	id  int
	sup *supervisor
	out sink
	log *slog.Logger
	// stages are the pipeline's steps, run around the handler's calls;
	// nil when it has none.
	stages *stages
	// pipeline names the pipeline, and intercept is Options.Intercept
	// (nil: none).
	pipeline  string
	intercept Interceptor
	// keyed is the pipeline's keyed state, nil when it keeps none.
	keyed *keyedState
	// guard, when set, lets the next batch go while the last is out if
	// they share no key (keyGuard); limit is then keyedOverlap. Nil: one
	// batch waits for the last unless limit says otherwise.
	guard *keyGuard

	limit   int           // batches in flight on the instance
	timeout time.Duration // of one call
	// took is how long the last call took, from send to answer (waiting
	// behind the batches sent before it included), in nanoseconds: past
	// steadyBatches, another batch goes only while it is short (deep).
	took       atomic.Int64
	maxCrashes int
	// hard ends at the pipeline's hard stop: calls are abandoned and
	// what is left handed back.
	hard context.Context
	// abort ends when the pipeline stops receiving: a restart of an
	// instance that died while idle is not waited for.
	abort <-chan struct{}
	// order carries the batches to the publisher in the order they were
	// sent, so that the instance works on the next batches while the
	// outputs of the last are published, and outputs go out in batch
	// order even when the answers come out of order.
	order chan *sent
	// calls hands a batch to a goroutine of the worker's that is idle
	// (send), made in run, closed when run returns.
	calls chan workerCall
}

// workerCall is a batch for one of a worker's goroutines: process it,
// close sb.done, then report it to fin.
type workerCall struct {
	b   *batch
	sb  *sent
	fin chan<- *batch
}

// answer is a handler's answer for the messages of a batch, from the
// instance that gave it.
type answer struct {
	items []*item
	res   []plugin.Result
	from  instance
}

// recycler is an instance that takes back the arrays of its answers once
// they are settled (a plugin process: host.Instance.Recycle), so that it
// need not make new ones for every batch.
type recycler interface {
	Recycle(res []plugin.Result)
}

// sent is a batch sent to the instance: done is closed once every part
// of it has its answer (or was dead-lettered or handed back).
type sent struct {
	answers []answer
	done    chan struct{}
}

// publish settles the answers in the order the batches were sent:
// outputs published, messages acknowledged after their receipts, retried
// or dead-lettered. It returns once run has returned.
func (w *worker) publish() {
	for b := range w.order {
		<-b.done
		for _, a := range b.answers {
			w.out.settle(a.items, a.res)
			// Settled: the outputs are in the producers' hands (their
			// payloads and maps, not the arrays).
			if r, ok := a.from.(recycler); ok {
				r.Recycle(a.res)
			}
		}
		if len(w.order) == 0 {
			w.out.caughtUp()
		}
	}
}

// run feeds the instance the batches of q, up to limit at once, until q
// is closed and the last has its answer, or hands them back once the
// hard stop came. With a guard, a batch that shares a key with one in
// flight waits (next) until that one is done, and the batches after it
// wait behind it.
func (w *worker) run(q <-chan *batch) {
	defer close(w.order)
	w.calls = make(chan workerCall)
	// After every call reported to fin (below): the goroutines end.
	defer close(w.calls)
	fin := make(chan *batch, w.limit)
	inflight := 0
	var next *batch
	for {
		var exited, changed <-chan struct{}
		var gen uint64
		if inflight == 0 {
			if w.sup.vacant() {
				// The last batch failed and nothing waits to start the
				// next instance: start it now, so the slot is up (and
				// counted as restarted) while the queue is quiet.
				if l, err := w.sup.ensure(w.abort); err == nil {
					w.sup.drop(l)
					continue
				}
			}
			// Nothing in flight: a death now is no call's, so watch for it.
			exited, gen, changed = w.sup.watch()
		}
		qq := q
		if next != nil || inflight >= w.limit || (inflight >= steadyBatches && !w.deep()) {
			qq = nil
		}
		select {
		case b, ok := <-qq:
			if !ok {
				for ; inflight > 0; inflight-- {
					<-fin
				}
				return
			}
			if w.guard != nil && inflight > 0 && w.guard.overlaps(b.items) {
				next = b
				continue
			}

			w.send(b, fin, &inflight)
		case b := <-fin:
			inflight--
			if w.guard != nil {
				w.guard.free(b.items)
				if next != nil && !w.guard.overlaps(next.items) {
					b, next = next, nil
					w.send(b, fin, &inflight)
				}
			}
		case <-changed:
			// Replaced, restarted or failed: watch the new one.
		case <-exited:
			// Died between batches (killed, or exited on its own): restart
			// it now rather than on the next batch's time.
			w.sup.lost(gen)
			// A stop does not wait for this restart: nothing depends on it.
			if l, err := w.sup.ensure(w.abort); err == nil {
				w.sup.drop(l)
			}
		}
	}
}

// send hands b to the instance: at once when the worker takes one batch
// at a time, else on one of the worker's goroutines (an idle one, or a
// new one) that reports to fin when b is done; after the hard stop, b is
// handed back instead.
func (w *worker) send(b *batch, fin chan<- *batch, inflight *int) {
	if w.hard.Err() != nil {
		for _, it := range b.items {
			w.out.handBack(it)
		}
		return
	}
	sb := &sent{done: make(chan struct{})}
	w.order <- sb
	if w.limit == 1 {
		// One at a time: no goroutine to hand it to.
		w.process(b, sb, true)
		close(sb.done)
		return
	}
	if w.guard != nil {
		w.guard.hold(b.items)
	}
	*inflight++
	c := workerCall{b: b, sb: sb, fin: fin}
	select {
	case w.calls <- c:
		// An idle goroutine took it.
	default:
		// At most limit of them, as many as batches in flight: one made
		// for each batch grew its stack anew each time, to the depth of
		// a plugin call (about 1 % of the host's CPU in
		// BenchmarkKeyedStateCounter, docs/benchmarks/keyed-state.md).
		go func() {
			for ; ; c = <-w.calls {
				if c.b == nil {
					return // closed: run returned
				}
				w.call1(c)
			}
		}()
	}
}

// call1 processes c's batch on one of the worker's goroutines.
func (w *worker) call1(c workerCall) {
	defer func() { c.fin <- c.b }()
	defer close(c.sb.done)
	w.process(c.b, c.sb, false)
}

// steadyBatches is how many batches an instance is always given at once
// (when its limit allows): one at work and the next waiting.
const steadyBatches = 2

// deep says whether the instance answers fast enough to be given more
// than steadyBatches batches at once: its last call took under a quarter
// of the timeout. Each batch's timeout runs from its send, waiting behind
// the others included, so a handler slow enough that k batches would
// wait near the timeout gets at most steadyBatches (as when k was the
// default), and is not taken for hung because more were queued.
func (w *worker) deep() bool {
	return time.Duration(w.took.Load()) < w.timeout/4
}

// process gets the handler's answer for every message of b, retrying on
// fresh instances through crashes and hangs, and leaves the answers in
// sb for the publisher. alone says that the instance never has another
// batch beside this one (limit 1).
func (w *worker) process(b *batch, sb *sent, alone bool) {
	items := b.items
	if w.stages != nil && w.stages.before != nil {
		// Once, not again on a retry after a crash: what the handler is
		// given stays on each item.
		if items = w.runBefore(b, items); len(items) == 0 {
			return
		}
	}
	parts := []part{{items: items}}
	for len(parts) > 0 {
		cur := &parts[0]
		if len(cur.items) == 0 {
			parts = parts[1:]
			continue
		}
		l, err := w.sup.acquire()
		if err != nil { // the hard stop
			for _, pt := range parts {
				for _, it := range pt.items {
					w.out.handBack(it)
				}
			}
			return
		}
		ctx, cancel := context.WithTimeout(w.out.calling(w.hard, b, w.id), w.timeout)
		t0 := time.Now()
		inst := l.inst()
		res, err := w.call(ctx, inst, cur.items)
		took := time.Since(t0)
		w.took.Store(int64(took))
		// The batch's deadline is the only one: the plugin may report it
		// a moment before ctx does.
		if errors.Is(err, context.DeadlineExceeded) && w.hard.Err() == nil {
			err = fmt.Errorf("%w: %d messages, no answer after %v: %w", errHung, len(cur.items), w.timeout, err)
		}
		cancel()
		w.out.called(b, w.id, len(cur.items), took, err)
		if err == nil {
			w.sup.release(l, nil)
			if w.stages != nil && w.stages.after != nil {
				w.runAfter(b, cur.items, res)
			}
			sb.answers = append(sb.answers, answer{cur.items, res, inst})
			parts = parts[1:]
			continue
		}
		if w.hard.Err() != nil {
			w.sup.abandon(l)
			continue // acquire sees it and hands everything back
		}
		first := w.sup.release(l, err)
		if !namesMessage(err, len(cur.items)) && (!first || !(alone || l.careful)) {
			// Another batch was (or may have been) in flight on the
			// instance: a failure that names no message may be the
			// other's. No strike; the retry goes alone. A panic that
			// names a message is this call's own (the host lets only a
			// plugin's first panic report name one), and strikes it
			// wherever it was seen, so that the strikes a dead letter's
			// reason gives are the crashes the message caused.
			continue
		}
		st := afterFailure(parts, err, w.maxCrashes)
		parts = st.parts
		for _, d := range st.dead {
			w.out.deadLetter(d.it, d.reason)
		}
		if st.split > 0 {
			w.log.Warn("batch keeps failing; splitting it to find the message", "instance", w.id, "messages", st.split, "failures", w.maxCrashes)
		}
	}
}
