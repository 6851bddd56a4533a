package runtime

import (
	"cmp"
	"math"
	"slices"

	"github.com/streamrun/streamrun/pipelines"
)

// Session windows (docs/pipelines.md, "Windows"). A key's sessions are
// made in the order its messages came (by horizon, which does not go
// back): a message joins every session of its key it falls within gap
// of that is not forgotten (its end after the message's horizon), and
// so merges them; one that joins none starts its own, unless that one
// ends at or before its horizon: then it is late. A late message within
// the allowed lateness can so move a fired session's start, or join two
// fired sessions: the session they make fires with their fire count
// going on, and names the starts it took in (Replaces), whose records
// go once it is answered.

// sessions are the sessions msgs make, and the messages among them that
// are late (read back from a changelog whose removal of them was lost).
func (w *windower) sessions(msgs []*winMsg) (out []span, late []*winMsg) {
	// By horizon, which does not go back. Messages of one horizon came
	// with nothing newer between them, in an order not kept (a changelog
	// read back has none), and none is needed: taken latest first, each
	// joins the sessions it joined when it came (and any it could have,
	// in another order). A message past the horizon moves a session's
	// start back only, so it never brings a later one within gap.
	ms := slices.Clone(msgs)
	slices.SortStableFunc(ms, func(a, b *winMsg) int {
		if c := cmp.Compare(a.Horizon, b.Horizon); c != 0 {
			return c
		}
		return cmp.Compare(b.Time, a.Time)
	})
	for _, m := range ms {
		ns := span{start: m.Time, end: m.Time + w.a.gap, msgs: []*winMsg{m}}
		joined := false
		kept := out[:0]
		for _, s := range out {
			if s.end > m.Horizon && s.start < ns.end && m.Time < s.end {
				ns.start, ns.end = min(ns.start, s.start), max(ns.end, s.end)
				ns.msgs = append(ns.msgs, s.msgs...)
				joined = true
				continue
			}
			kept = append(kept, s)
		}
		if !joined && ns.end <= m.Horizon {
			late = append(late, m)
			continue
		}
		out = append(kept, ns)
	}
	return out, late
}

// mayJoinSession says whether a message of key, late by its own
// session, may still join one of the key's: only then is it written
// and placed, and sessionLate decides.
func (w *windower) mayJoinSession(key string) bool {
	if w.a.kind != pipelines.Session {
		return false
	}
	k := w.keys[key]
	return w.writing[key] > 0 || (k != nil && len(k.msgs) > 0)
}

// sessionLate says whether m, durable now, is late: its own session is
// forgotten and it joins none of its key's that is not.
func (w *windower) sessionLate(m *winMsg) bool {
	if w.a.kind != pipelines.Session || m.Horizon == math.MinInt64 || m.Time+w.a.gap > m.Horizon {
		return false
	}
	k := w.keys[m.Key]
	if k == nil {
		return true
	}
	ss, _ := w.sessions(k.msgs)
	for _, s := range ss {
		if s.end > m.Horizon && s.start < m.Time+w.a.gap && m.Time < s.end {
			return false
		}
	}
	return true
}

// takenIn are the starts of the fired sessions of k that session sp
// took in, and the most fires of them and base; busy when one of them
// is being handed over (sp waits for its answer). Windows that never
// fired within sp go.
//
// sp took in a session only if it holds that session's first message
// (the one at its start). Sessions may overlap: a message that came
// after an earlier session's horizon starts its own session even when
// its time falls inside the earlier one (sessions); the earlier then
// spans the later's start without holding any of its messages, and must
// not fire again in its place.
func takenIn(k *winKey, sp *span, base int) (replaces []int64, most int, busy bool) {
	most = base
	for start, o := range k.wins {
		if start <= sp.start || start >= sp.end || o.forgotten || !holdsAt(sp, start) {
			continue
		}
		switch {
		case o.inflight:
			busy = true
		case o.fires > 0:
			replaces = append(replaces, start)
			most = max(most, o.fires)
		default:
			delete(k.wins, start) // a retry that waited: sp fires in its place
		}
	}
	slices.Sort(replaces)
	return replaces, most, busy
}

// holdsAt says whether sp holds a message at time t.
func holdsAt(sp *span, t int64) bool {
	for _, m := range sp.msgs {
		if m.Time == t {
			return true
		}
	}
	return false
}

// within says whether start falls inside one of spans (after its start).
func within(spans []span, start int64) bool {
	for _, sp := range spans {
		if sp.start < start && start < sp.end {
			return true
		}
	}
	return false
}

// satAdd is a+b, staying at math.MinInt64 for "no watermark yet".
func satAdd(a, b int64) int64 {
	if a == math.MinInt64 {
		return a
	}
	return a + b
}
