package runtime

import (
	"slices"

	"github.com/streamrun/streamrun/pulsarwire"
)

// stateHeld is keyedState.held: the messages in the host's hands, and
// those acknowledged a moment ago, by id. A map of them was an insert and
// a delete a message, each hashing the topic's name and the id, about a
// tenth of the host's extra CPU for keyed state in
// BenchmarkKeyedStateCounter (docs/benchmarks/keyed-state.md). Keyed
// state needs an ordered subscription, whose messages of one topic (or
// partition) come in the order of their ids, so each topic's are kept in
// a list in that order instead: a new message is appended, one is found
// by binary search (most often it is the oldest, the list's head), and
// one let go is cleared in place. What comes out of order (a message
// handed back and received again) goes to a map beside.
type stateHeld struct {
	logs  map[string]*stateHeldLog
	other map[retryKey]*heldMessage
	// last is the log of lastTopic, the topic of the last call: a
	// pipeline most often reads one topic, and a string compare of the
	// same name is a pointer compare.
	last      *stateHeldLog
	lastTopic string
}

// stateHeldLog is one topic's messages in hand, by id (BatchSize 0).
type stateHeldLog struct {
	ids  []pulsarwire.MessageID
	hs   []heldMessage // m nil once let go
	head int           // entries before it are all let go
	top  pulsarwire.MessageID
	any  bool
}

func newStateHeld() *stateHeld {
	return &stateHeld{logs: map[string]*stateHeldLog{}, other: map[retryKey]*heldMessage{}}
}

// log is topic's list, made when make says so (else nil when there is
// none).
func (h *stateHeld) log(topic string, make bool) *stateHeldLog {
	if h.last != nil && h.lastTopic == topic {
		return h.last
	}
	lg := h.logs[topic]
	if lg == nil {
		if !make {
			return nil
		}
		lg = &stateHeldLog{}
		h.logs[topic] = lg
	}
	h.last, h.lastTopic = lg, topic
	return lg
}

// find is the entry of k, or nil. It is good until the next put or
// remove.
func (h *stateHeld) find(k retryKey) *heldMessage {
	if lg := h.log(k.topic, false); lg != nil && lg.any && k.id.Compare(lg.top) <= 0 {
		if i, ok := lg.index(k.id); ok {
			if e := &lg.hs[i]; e.m != nil {
				return e
			}
		}
	}
	if len(h.other) == 0 {
		return nil
	}
	return h.other[k]
}

// index is where id is in lg's live entries.
func (lg *stateHeldLog) index(id pulsarwire.MessageID) (int, bool) {
	if lg.head < len(lg.ids) && lg.ids[lg.head] == id {
		return lg.head, true // settled in order: the oldest
	}
	i, ok := slices.BinarySearchFunc(lg.ids[lg.head:], id, pulsarwire.MessageID.Compare)
	return lg.head + i, ok
}

// put holds e under k, which find did not have.
func (h *stateHeld) put(k retryKey, e heldMessage) {
	lg := h.log(k.topic, true)
	if !lg.any || k.id.Compare(lg.top) > 0 {
		lg.top, lg.any = k.id, true
		lg.ids = append(lg.ids, k.id)
		lg.hs = append(lg.hs, e)
		return
	}
	c := e
	h.other[k] = &c
}

// remove lets k's entry e (from find) go.
func (h *stateHeld) remove(k retryKey, e *heldMessage) {
	if len(h.other) > 0 && h.other[k] == e {
		delete(h.other, k)
		return
	}
	lg := h.log(k.topic, false)
	if lg == nil {
		return
	}
	*e = heldMessage{}
	lg.trim()
}

// trim moves lg's head past the entries let go.
func (lg *stateHeldLog) trim() {
	for lg.head < len(lg.hs) && lg.hs[lg.head].m == nil {
		lg.head++
	}
	switch {
	case lg.head == len(lg.hs):
		clear(lg.hs)
		lg.ids, lg.hs, lg.head = lg.ids[:0], lg.hs[:0], 0
	case lg.head >= 1024 && lg.head*2 >= len(lg.hs):
		// Move the entries left down once as many before them are let
		// go: each entry is moved about once.
		n := copy(lg.ids, lg.ids[lg.head:])
		copy(lg.hs, lg.hs[lg.head:])
		clear(lg.hs[n:])
		lg.ids, lg.hs, lg.head = lg.ids[:n], lg.hs[:n], 0
	}
}

// sweep lets go of every entry for which drop says so.
func (h *stateHeld) sweep(drop func(*heldMessage) bool) {
	for k, e := range h.other {
		if drop(e) {
			delete(h.other, k)
		}
	}
	for _, lg := range h.logs {
		for i := lg.head; i < len(lg.hs); i++ {
			if e := &lg.hs[i]; e.m != nil && drop(e) {
				*e = heldMessage{}
			}
		}
		lg.trim()
	}
}

// len is how many entries are held (for tests).
func (h *stateHeld) len() int {
	n := len(h.other)
	for _, lg := range h.logs {
		for _, e := range lg.hs[lg.head:] {
			if e.m != nil {
				n++
			}
		}
	}
	return n
}
