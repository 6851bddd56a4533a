package runtime

// Windows when the subscription comes back. As keyed state
// (state_regain.go), the open windows in memory are those of before the
// consumer subscribed again by itself, and another host may have held
// the Exclusive subscription meanwhile, placed messages in the windows,
// fired and forgotten some, and written its accumulators. So the
// windows are read back from their changelog too, by the same steps
// (pipeline.regain): letGo below empties them first, handing back the
// messages they hold unacknowledged; what was handed out before (a
// fire, an add, a changelog write whose receipt is to come) is let go
// when it comes back, by its sub: an add's accumulator is not written,
// for it would write over the other host's (docs/pipelines.md,
// "Windows").

// stale says whether what was made at generation sub (windower.gen) is
// of before the windows were last read back, or before the consumer
// subscribed again since, or whether the consumer is subscribing again
// now. Called under mu.
//
// While the consumer is subscribing again, another host may hold the
// Exclusive subscription, have read the windows back and fire them: a
// fire or an accumulator this host made from its memory, committed or
// written then, would be a second fire, or write over the other host's
// accumulator (the campaign's eo-window, broker kill -9: the waiting
// host took over and both fired). The consumer always comes back by
// subscribing again, so the windows are read back before anything else
// is made.
//
// Disconnected is asked first: it takes the consumer's lock, under which
// a subscription made again is installed and counted at once, so the
// count read after it is never one of before a session it saw. Read the
// other way round, a count of before and a session of after made a
// consumer that had just subscribed again look as if it never left.
func (w *windower) stale(sub uint64) bool {
	return sub != w.gen || w.p.cons.Disconnected() || w.p.cons.Resubscribed() != w.sub
}

// letGo empties the windows in memory before they are read back at the
// consumer's Resubscribed count at: the messages they hold whose
// contribution is not acknowledged are handed back (they come again),
// and what comes back later for what they handed out is let go. It runs
// on the receive goroutine.
func (w *windower) letGo(at uint64) {
	p := w.p
	// Not while the writer writes what was made before (window_writer.go).
	w.writeMu.Lock()
	w.mu.Lock()
	w.sub = at
	w.gen++
	durable, segs, out := w.durable, w.segsDone, w.segOut
	w.durable, w.done, w.addsDone, w.segsDone, w.accWrites, w.segOut = nil, nil, nil, nil, nil, nil
	w.mu.Unlock()
	w.writeMu.Unlock()
	for _, d := range durable {
		p.handBack(&item{m: d.m})
	}
	for _, d := range segs {
		for _, pm := range d.seg.msgs {
			p.handBack(&item{m: pm.m})
		}
	}
	for _, s := range out { // never written
		for _, pm := range s.msgs {
			p.handBack(&item{m: pm.m})
		}
	}
	w.reset()
}
