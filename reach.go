package streamrun

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pool"
)

// brokerReach follows the operations the run's client is retrying
// (pool.Options.OnRetry and OnRetryEnd), so that a run that cannot reach
// its broker says so: /readyz answers 503 with what is waited for, and
// the status lines are warnings naming it, from the first failed
// attempt until the operation succeeds or gives up. A broker that
// answers "not now" is up and does not count.
type brokerReach struct {
	mu sync.Mutex
	// waits are the operations retrying now, by name: how many of that
	// name, since when, and their last attempt.
	waits map[string]*reachWait
	now   func() time.Time
}

type reachWait struct {
	n     int
	since time.Time
	last  pool.RetryEvent
}

func newBrokerReach() *brokerReach {
	return &brokerReach{waits: map[string]*reachWait{}, now: time.Now}
}

// hook has the client of o tell b of its retries, besides what o's own
// hooks are told.
func (b *brokerReach) hook(o *pool.Options) {
	retry, end := o.OnRetry, o.OnRetryEnd
	o.OnRetry = func(ev pool.RetryEvent) {
		b.retry(ev)
		if retry != nil {
			retry(ev)
		}
	}
	o.OnRetryEnd = func(ev pool.RetryEvent) {
		b.end(ev)
		if end != nil {
			end(ev)
		}
	}
}

func (b *brokerReach) retry(ev pool.RetryEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.waits[ev.Op]
	if w == nil {
		w = &reachWait{since: b.now()}
		b.waits[ev.Op] = w
	}
	if ev.Attempt == 1 {
		w.n++ // an operation's first retry: one more of this name waits
	}
	w.last = ev
}

func (b *brokerReach) end(ev pool.RetryEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.waits[ev.Op]
	if w == nil {
		return
	}
	if w.n--; w.n <= 0 {
		delete(b.waits, ev.Op)
	}
}

// unreachable describes the oldest operation waiting now for a broker
// that cannot be reached, "" when none does.
func (b *brokerReach) unreachable() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ws []*reachWait
	for _, w := range b.waits {
		if w.last.Unreachable() {
			ws = append(ws, w)
		}
	}
	if len(ws) == 0 {
		return ""
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].since.Before(ws[j].since) })
	w := ws[0]
	s := fmt.Sprintf("the broker cannot be reached: %s has failed for %s (attempt %d, the next in %s): %v",
		w.last.Op, b.now().Sub(w.since).Round(time.Second), w.last.Attempt, w.last.Delay, w.last.Err)
	if len(ws) > 1 {
		s += fmt.Sprintf("; %d more operations wait", len(ws)-1)
	}
	return s
}

// err is unreachable as an error, nil while the broker is reached.
func (b *brokerReach) err() error {
	if s := b.unreachable(); s != "" {
		return reachError(s)
	}
	return nil
}

type reachError string

func (e reachError) Error() string { return string(e) }
