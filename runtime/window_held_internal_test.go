package runtime

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/streamrun/streamrun/pulsarwire"
)

// The messages in hand (heldSet) answer as a map of them would: through
// messages held in order and out of it, let go in any order, the lists
// moved down, on two topics, and ids that are not numbers. A copy of a
// message in hand is found (a redelivery is not taken twice), one let
// go or never held is not.
func TestWindowHeldSetIsAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := newHeldSet()
	ref := map[heldKey]*winMsg{}
	byKey := map[heldKey]*winMsg{}
	mk := func(topic string, ledger, entry uint64) *winMsg {
		id := pulsarwire.MessageID{Ledger: ledger, Entry: entry, Partition: -1, BatchIndex: -1, BatchSize: 3}
		m := &winMsg{ID: id.String(), Topic: topic}
		m.setID(id)
		return m
	}
	topics := []string{"persistent://public/default/a-partition-0", "persistent://public/default/a-partition-1"}
	next := map[string]uint64{}
	var live []*winMsg
	check := func(step int) {
		for k, m := range ref {
			if got := h.holding(k); got != m {
				t.Fatalf("step %d: %v held, holding says %v", step, k, got)
			}
		}
		for k := range byKey {
			if _, ok := ref[k]; !ok && h.holding(k) != nil {
				t.Fatalf("step %d: %v let go, holding still finds it", step, k)
			}
		}
	}
	for step := range 40_000 {
		switch op := r.IntN(10); {
		case op < 4: // a new message, in order
			tp := topics[r.IntN(2)]
			next[tp]++
			m := mk(tp, 7, next[tp])
			h.hold(m)
			ref[m.held()], byKey[m.held()] = m, m
			live = append(live, m)
		case op < 5 && next[topics[0]] > 0: // one handed back and received again: out of order
			e := uint64(r.IntN(int(next[topics[0]]))) + 1
			m := mk(topics[0], 7, e)
			if ref[m.held()] != nil {
				continue
			}
			h.hold(m)
			ref[m.held()], byKey[m.held()] = m, m
			live = append(live, m)
		case op < 6: // an id that is not a number
			m := &winMsg{ID: fmt.Sprintf("x%d", step), Topic: topics[1]}
			h.hold(m)
			ref[m.held()], byKey[m.held()] = m, m
			live = append(live, m)
		case len(live) > 0: // let one go, mostly the oldest
			i := 0
			if r.IntN(8) == 0 {
				i = r.IntN(len(live))
			}
			m := live[i]
			live = append(live[:i], live[i+1:]...)
			h.unhold(m)
			delete(ref, m.held())
		}
		if step%500 == 0 {
			check(step)
		}
	}
	check(-1)
	for _, m := range live {
		h.unhold(m)
	}
	for k := range byKey {
		if h.holding(k) != nil {
			t.Fatalf("%v found with nothing in hand", k)
		}
	}
}
