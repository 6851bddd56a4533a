package runtime

import (
	"slices"

	"github.com/streamrun/streamrun/pulsarwire"
)

// heldSet is the messages a windower has in hand (windower.held), to
// know a redelivered copy from a new message. A map of them was about a
// tenth of the host's CPU in BenchmarkWindowCount: an insert and a
// delete a message, each a cache miss in a table of every message held.
// On the Exclusive subscription windows read, a partition's messages
// come in the order of their ids, so each topic's are kept in a list in
// that order instead: a new message is appended, a copy found by binary
// search, and one let go is cleared in place by its index. What comes
// out of order (a message handed back and received again, or an id
// that is not a number) goes to a map beside.
type heldSet struct {
	logs  map[string]*heldLog
	other map[heldKey]*winMsg
	// last is the log of lastTopic: a pipeline mostly reads one topic,
	// and a map lookup a message held and let go showed in
	// BenchmarkWindowCount.
	last      *heldLog
	lastTopic string
}

// log is topic's list, nil when it has none.
func (h *heldSet) log(topic string) *heldLog {
	if h.last != nil && h.lastTopic == topic {
		return h.last
	}
	lg := h.logs[topic]
	if lg != nil {
		h.last, h.lastTopic = lg, topic
	}
	return lg
}

// heldLog is one topic's messages in hand, by id.
type heldLog struct {
	ids  []pulsarwire.MessageID // of every entry since base, held or not
	msgs []*winMsg              // nil once let go
	head int                    // entries before it are all let go
	base int64                  // the index, since the first, of ids[0]
	top  pulsarwire.MessageID   // the newest id appended, if any
	any  bool
}

func newHeldSet() *heldSet {
	return &heldSet{logs: map[string]*heldLog{}, other: map[heldKey]*winMsg{}}
}

// hold puts m in hand.
func (h *heldSet) hold(m *winMsg) {
	hk := m.held()
	if hk.raw == "" {
		lg := h.log(hk.topic)
		if lg == nil {
			lg = &heldLog{}
			h.logs[hk.topic] = lg
		}
		if !lg.any || hk.id.Compare(lg.top) > 0 {
			lg.top, lg.any = hk.id, true
			lg.ids = append(lg.ids, hk.id)
			lg.msgs = append(lg.msgs, m)
			m.slot = lg.base + int64(len(lg.ids)) // 1-based: 0 is "not in a list"
			return
		}
	}
	m.slot = 0
	h.other[hk] = m
}

// holding is the message in hand that hk names, or nil.
func (h *heldSet) holding(hk heldKey) *winMsg {
	if hk.raw == "" {
		lg := h.log(hk.topic)
		if lg == nil || !lg.any || hk.id.Compare(lg.top) > 0 {
			return nil // after every one held: new (what is in other is not newer either)
		}
		live := lg.ids[lg.head:]
		if i, ok := slices.BinarySearchFunc(live, hk.id, pulsarwire.MessageID.Compare); ok {
			if m := lg.msgs[lg.head+i]; m != nil {
				return m
			}
		}
	}
	if len(h.other) == 0 {
		return nil
	}
	return h.other[hk]
}

// unhold lets m go.
func (h *heldSet) unhold(m *winMsg) {
	if m.slot == 0 {
		hk := m.held()
		if h.other[hk] == m {
			delete(h.other, hk)
		}
		return
	}
	slot := m.slot
	m.slot = 0
	lg := h.log(m.Topic)
	if lg == nil {
		return
	}
	i := slot - 1 - lg.base
	if i < 0 || i >= int64(len(lg.msgs)) || lg.msgs[i] != m {
		return
	}
	lg.msgs[i] = nil
	for lg.head < len(lg.msgs) && lg.msgs[lg.head] == nil {
		lg.head++
	}
	switch {
	case lg.head == len(lg.msgs):
		lg.base += int64(len(lg.msgs))
		lg.ids, lg.msgs, lg.head = lg.ids[:0], lg.msgs[:0], 0
	case lg.head >= 1024 && lg.head*2 >= len(lg.msgs):
		// Move the entries left down, once as many are let go before
		// them: each entry is moved about once.
		n := copy(lg.ids, lg.ids[lg.head:])
		copy(lg.msgs, lg.msgs[lg.head:])
		clear(lg.msgs[n:])
		lg.base += int64(lg.head)
		lg.ids, lg.msgs, lg.head = lg.ids[:n], lg.msgs[:n], 0
	}
}
