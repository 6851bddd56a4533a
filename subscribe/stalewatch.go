package subscribe

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// staleWatch catches a rewind that skipped entries. After a redelivery
// of everything (redeliverAll) the broker rewinds to the oldest
// unacknowledged entry and sends from there with the new consumer epoch.
// Apache Pulsar 4.0.8 may finish a read it began before the rewind after
// it: that read's entries come with the old epoch, so they are dropped
// here, and its end moves the cursor's read position past them, so they
// do not come again until the next rewind (an exactly_once pipeline lost
// them: docs/reliability.md). The watch notes the entries dropped as
// stale under the current epoch; once an entry of that epoch comes from
// beyond one of them that has not come again, the rewind skipped it, and
// the part asks for everything again.
type staleWatch struct {
	n atomic.Int64 // entries noted: arrived does nothing while there are none

	mu      sync.Mutex
	epoch   uint64 // the epoch the noted entries were stale under
	dropped map[entryPos]struct{}
}

// stale notes p, dropped for an epoch older than cur.
func (w *staleWatch) stale(p entryPos, cur uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped == nil || w.epoch != cur {
		w.dropped, w.epoch = map[entryPos]struct{}{}, cur
	}
	w.dropped[p] = struct{}{}
	w.n.Store(int64(len(w.dropped)))
}

// arrived takes p, sent with epoch, off the noted entries and reports
// whether an entry noted under that epoch lies before it: the broker
// skipped it. The notes are then forgotten (everything is asked for
// again, under a new epoch).
func (w *staleWatch) arrived(p entryPos, epoch uint64) (skipped entryPos, gap bool) {
	if w.n.Load() == 0 {
		return entryPos{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.epoch != epoch {
		return entryPos{}, false
	}
	delete(w.dropped, p)
	for q := range w.dropped {
		if q.compare(p) < 0 {
			w.resetLocked()
			return q, true
		}
	}
	w.n.Store(int64(len(w.dropped)))
	return entryPos{}, false
}

// reset forgets the notes: a new session starts from the oldest
// unacknowledged entry anyway.
func (w *staleWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resetLocked()
}

func (w *staleWatch) resetLocked() {
	w.dropped = nil
	w.n.Store(0)
}

func (p entryPos) String() string { return fmt.Sprintf("%d:%d", p.ledger, p.entry) }
