package runtime

// The writer of an incremental pipeline's changelog records
// (window_incr.go): the segments the receive loop makes and the
// accumulators the answers bring are encoded and published on a
// goroutine of their own, so that the receive loop, which every message
// goes through, only queues them (BenchmarkWindowCount: encoding the
// segments was a tenth of its work). It writes each kind in the order
// it was queued, so segments still have their receipts in the order they
// were made; a round's segments go before its accumulators, though an
// accumulator never needs that: an add takes only messages whose segment
// has its receipt. The receive goroutine starts it and stops it
// (receive), once it has written what was queued.

// startWriter starts the writer; stop ends it once it has written what
// is queued, and waits for it.
func (w *windower) startWriter() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	w.writerOn.Store(true)
	w.kickWriter() // what was queued while none ran (a reload's drain)
	go func() {
		defer close(done)
		var buf []byte // the segments', reused: the producer copies a payload
		for {
			select {
			case <-w.writeWake:
				buf = w.writeQueued(buf)
			case <-quit:
				w.writeQueued(buf)
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		w.writerOn.Store(false)
		// What was queued since it stopped (an answer's accumulator) is
		// written by the receive goroutine, were it to go on.
	}
}

func (w *windower) kickWriter() {
	select {
	case w.writeWake <- struct{}{}:
	default:
	}
}

// writeQueued writes the segments and accumulators queued. It holds
// writeMu meanwhile, so that the windows are not read back while it
// writes what was made before (letGo).
func (w *windower) writeQueued(buf []byte) []byte {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	w.mu.Lock()
	segs, accs := w.segOut, w.accWrites
	w.segOut, w.accWrites = nil, nil
	w.mu.Unlock()
	for _, s := range segs {
		buf = w.writeSegment(s, buf)
	}
	for _, aw := range accs {
		w.publishAcc(aw.f, aw.rec)
	}
	if w.starved.Load() && len(segs)+len(accs) > 0 {
		// The receive loop waits for these receipts: the batch's delay
		// would stall it (pool.Client.SendOpenBatches).
		w.p.client.SendOpenBatches()
	}
	return buf
}
