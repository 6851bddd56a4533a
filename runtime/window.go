package runtime

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// Properties of the message a handler gets for a closed window
// (docs/pipelines.md, "Windows"); its payload is the window as JSON.
const (
	PropertyWindowStart = "streamrun-window-start"
	PropertyWindowEnd   = "streamrun-window-end"
	PropertyWindowFire  = "streamrun-window-fire"
	// PropertyWindowAdd marks an incremental window's add step: how many
	// messages it brings to the accumulator.
	PropertyWindowAdd = "streamrun-window-add"
	// PropertyLate marks a message sent to the late topic: the watermark
	// it came behind.
	PropertyLate = "streamrun-late-watermark"
)

// windowTick is how often the receive loop looks at its windows while no
// message comes: the watermark of idle partitions and of processing time
// moves with the clock, and answered windows are to be recorded.
const windowTick = 20 * time.Millisecond

// windower keeps a pipeline's open windows (docs/pipelines.md,
// "Windows"). Its messages, keys and watermarks belong to the receive
// goroutine; the connection and worker goroutines only queue what they
// learn (a record's receipt, a window's answer) under mu, for the
// receive loop to act on in order.
//
// A message's way: take writes it to the changelog; its receipt queues
// it; process places it by the watermark as it was when it became
// durable (in the order of receipts, which is the order of writing),
// then acknowledges it. Windows the watermark passed go to the handler
// as items of their own (item.win), which settle reports back here
// instead of acknowledging.
type windower struct {
	p        *pipeline
	cfg      pipelines.Window
	a        assigner
	topic    string // the changelog
	srcTopic string // the topic a window's message names
	idle     int64  // ms
	incr     bool   // incremental: an accumulator a window (window_incr.go)
	// compact: the instance started last speaks contract version 5, so
	// a window due with messages waiting is one add-and-fire item
	// (window_incr.go, addItem); set by the supervisors.
	compact atomic.Bool

	mu      sync.Mutex
	durable []durableMsg
	// sub is the consumer's Resubscribed count when the windows were
	// last read back: what was received or handed out before another
	// count is let go (window_regain.go). Written under mu.
	sub uint64
	// gen counts the times the windows were read back (letGo): what was
	// handed out or written before is let go when it comes back. Written
	// under mu, on the receive goroutine.
	gen  uint64
	done []fireDone
	// addsDone are the incremental adds answered, segsDone the
	// receipts of their segments (window_incr.go).
	addsDone []addDone
	segsDone []segDone
	// accWrites are accumulator records an answer made, written by the
	// writer (window_writer.go), else the receive goroutine, not where
	// the answer comes: an answer may come in a receipt's callback, on
	// the connection's read loop, where a publish that waits for room
	// (pool.Options.MemoryLimit, MaxPendingMessages) would wait for
	// receipts that loop alone reads.
	accWrites []accWrite
	wake      chan struct{} // something queued for process
	// segOut are the segments made, for the writer to encode and write
	// (window_writer.go), in order; writerOn says whether it runs, and
	// writeMu is held while it writes.
	segOut    []*segment
	writerOn  atomic.Bool
	writeWake chan struct{}
	writeMu   sync.Mutex
	// starved: the receive loop waits for receipts, holding no credit:
	// what the writer publishes is sent at once, not after the batch's
	// delay.
	starved atomic.Bool

	keys map[string]*winKey
	// arrived is the watermark of the messages as they come, which
	// says which are late and which windows they may join; placed is
	// that of the messages placed in their windows (durable), which
	// fires them. A restart reads both back from the records.
	arrived, placed *watermarks
	held            *heldSet // messages in hand (winMsg.durable once written)
	nextCheck       int64
	rescan          bool            // look at every key
	dirty           map[string]bool // keys to look at: answered, retried, or grown behind the watermark
	adds            map[winID2]bool // incremental windows to make an add of
	seq             uint64
	// Incremental mode (window_incr.go): the segment being made, the
	// segments written in order until they are gone, those just done
	// with, the forgotten windows' records waiting for older segments
	// to go, and the size of the messages waiting for their adds.
	cur          *segment
	segBuf       []byte
	segLeft      int // messages of the receive not yet taken, the segment's first included
	segSeq       uint64
	idBuf        []byte // idTexts'
	ackItems     []item // placeSegment's
	idEnds       []int
	segs         []*segment
	segGone      []*segment
	deferred     []deferredGone
	pendingBytes int
	// writing counts each key's messages whose changelog write has no
	// receipt yet: a session message that is late by its own window may
	// still join one of them (sessionLate).
	writing map[string]int
	late    atomic.Int64
	open    atomic.Int64 // messages held in open windows
	// partsAt is when the consumer's partitions were last told to the
	// watermarks (expectPartitions).
	partsAt time.Time
	// copies: under exactly_once, the newest copy of a message whose
	// record is being written, to acknowledge in its place
	// (window_exactly.go).
	copies map[heldKey]*subscribe.Message
	// unacked: under exactly_once, the inputs counted in windows whose
	// acknowledgement has not committed yet, and the windows they count
	// in; acksDone, those whose acknowledgement committed since
	// (window_exactly.go). Written under mu.
	unacked  map[heldKey]unackedIn
	acksDone []heldKey
	freed    map[string]bool // keys with such messages that may go now
	// pins: what was read back, kept until the subscription's
	// mark-delete position on its partition passes it; pinMarks, the
	// positions the last look found (under mu), pinLook whether one is
	// under way, pinLooks its goroutine (window_exactly.go).
	pins     map[string][]pin
	pinMarks map[string]msgPos
	pinLook  bool
	pinNext  time.Time
	pinLooks sync.WaitGroup
}

type durableMsg struct {
	wm  *winMsg
	m   *subscribe.Message
	err error
}

type fireDone struct {
	key      string
	start    int64
	fire     int
	n        int
	replaces []int64
	ok       bool
	delay    time.Duration
}

type winKey struct {
	msgs []*winMsg
	wins map[int64]*winState
	accs map[int64]*winAcc // incremental mode, by start
	// last is the accumulator accOf gave last, at lastStart: a key's
	// messages mostly go to the window its message before went to.
	last      *winAcc
	lastStart int64
}

// winState is one window of a key that fired or is being handed over.
type winState struct {
	fires    int // answered fires
	n        int // messages it held when it last fired
	inflight bool
	// forgotten: past its lateness; kept (never fired again) while a
	// message of another window falls in it too.
	forgotten bool
	retryAt   time.Time
	id        uint64
	// legacy: incremental, read back from a fired record f| (written
	// before the accumulator's record held the mark), to remove with it.
	legacy bool
}

// windowFire is what an item carries when it is a window.
type windowFire struct {
	key   string
	start int64
	fire  int
	n     int
	// add: an incremental window's add step, with the accumulator it
	// starts from; nil for a fire.
	add *addCall
	acc []byte
	// rec is an incremental fire's accumulator record, its fired mark
	// to be (exactly_once: in its transaction, settleIn).
	rec *accRecord
	// wp is an incremental window's message before it is encoded, in
	// the form of the instance it goes to (form, window_compact.go).
	wp   *windowPayload
	form int
	// An add and fire in one (add set, fire > 0; contract version 5):
	// acked, the handler answered it (its outputs are published), and
	// newAcc is the accumulator its add made (nil: none).
	acked  bool
	newAcc []byte
	// unsent: the instance it was for speaks a contract version before
	// 5 and its call had an add and fire in one: it was handed back
	// without going (windowsFor).
	unsent bool
	// replaces are the fired sessions this one took in (sessionFire).
	replaces []int64
	// sub is windower.gen when it was handed out: an answer after the
	// windows were read back is let go (window_regain.go).
	sub uint64
}

func newWindower(p *pipeline) *windower {
	w := &windower{p: p, cfg: p.cfg.Window, a: newAssigner(p.cfg.Window), topic: p.cfg.WindowChangelogTopic(),
		idle: p.cfg.Window.IdleTimeout.Milliseconds(),
		wake: make(chan struct{}, 1), writeWake: make(chan struct{}, 1), incr: p.cfg.Window.Incremental()}
	w.reset()
	if len(p.cfg.Source.Topics) > 0 {
		w.srcTopic = p.cfg.Source.Topics[0]
	}
	return w
}

// reset empties what the receive goroutine keeps of the windows, for
// restore to fill.
func (w *windower) reset() {
	w.keys, w.held, w.dirty = map[string]*winKey{}, newHeldSet(), map[string]bool{}
	w.adds, w.writing = map[winID2]bool{}, map[string]int{}
	w.cur, w.segBuf, w.segs, w.segGone, w.deferred, w.pendingBytes = nil, nil, nil, nil, nil, 0
	w.nextCheck, w.rescan, w.partsAt = math.MinInt64, false, time.Time{}
	w.copies = nil
	w.unacked, w.freed, w.pins = nil, nil, nil
	wc := &w.cfg
	w.arrived = newWatermarks(wc.OutOfOrder, wc.IdleTimeout, wc.Time == pipelines.TimeProcessing)
	w.placed = newWatermarks(wc.OutOfOrder, wc.IdleTimeout, wc.Time == pipelines.TimeProcessing)
	w.open.Store(0)
}

// expectPartitions tells both watermarks of the partitions the consumer
// reads (those it took over since, too), so that each holds them back
// from the start, not from its first message. A second apart at most: the
// list is the consumer's, under its lock.
func (w *windower) expectPartitions(now time.Time) {
	w.partsAt = now
	for _, t := range w.p.cons.Topics() {
		w.arrived.expect(t, now)
		w.placed.expect(t, now)
	}
}

// restore reads the open windows back from the changelog, as keyed
// state is read.
func (w *windower) restore(ctx context.Context) error {
	s := newKeyedState(w.topic, 0, false, 0, "", w.p.log)
	// Under exactly_once the windows' records are written in
	// transactions (read waits on them).
	s.txnWritten = w.p.cfg.ExactlyOnce()
	if err := s.restore(ctx, w.p.client, w.p.cfg.Source.Subscription); err != nil {
		return fmt.Errorf("windows: %w", err)
	}
	r := parseRecords(s.vals.all())
	now := time.Now()
	for t, max := range r.marks {
		w.arrived.observe(t, max, now)
		w.placed.observe(t, max, now)
	}
	for _, m := range r.msgs {
		w.insert(m)
		w.arrived.observe(m.Topic, m.Time, now)
		w.placed.observe(m.Topic, m.Time, now)
		m.durable = true
		w.held.hold(m)
	}
	for key, fs := range r.fired {
		k := w.key(key)
		for start, f := range fs {
			w.seq++
			k.wins[start] = &winState{fires: f.fires, n: f.n, forgotten: f.forgotten, id: w.seq, legacy: w.incr}
		}
	}
	w.restoreAccs(r.accs, now)
	if len(r.segs) > 0 {
		w.restoreSegments(r.segs, now)
	}
	if r.bad > 0 {
		w.p.log.Warn("windows: changelog records that could not be read were left out", "changelog", w.topic, "records", r.bad)
	}
	w.pinRestored(r.msgs, r.accs)
	w.rescan = true
	w.open.Store(int64(len(r.msgs)))
	w.p.log.Info("windows read back from the changelog", "changelog", w.topic, "messages", len(r.msgs), "segments", len(r.segs), "keys", len(w.keys))
	return nil
}

func (w *windower) key(k string) *winKey {
	wk := w.keys[k]
	if wk == nil {
		wk = &winKey{wins: map[int64]*winState{}}
		w.keys[k] = wk
	}
	return wk
}

func (w *windower) insert(m *winMsg) {
	k := w.key(m.Key)
	k.msgs = append(k.msgs, m)
}

// take writes each received message to the changelog; it is placed in
// its windows once the write has its receipt (process).
func (w *windower) take(ms []*subscribe.Message, now time.Time) {
	p := w.p
	if now.Sub(w.partsAt) >= time.Second {
		w.expectPartitions(now)
	}
	ids := w.idTexts(ms)
	from := 0
	for i, m := range ms {
		w.segLeft = len(ms) - i
		id := ids[from:w.idEnds[i]]
		from = w.idEnds[i]
		t, err := timeOf(&w.cfg, m, now)
		if err != nil {
			p.deadLetter(&item{m: m}, err.Error())
			continue
		}
		var wm *winMsg
		var pm *pendMsg
		if w.incr {
			// The message and its place in a segment in one allocation:
			// fewer objects for the collector, and the two are read
			// together when its window's add is made and answered.
			tm := &takenMsg{}
			wm, pm = &tm.wm, &tm.pm
		} else {
			wm = &winMsg{}
		}
		*wm = winMsg{ID: id, Topic: m.Topic, Key: m.Key, Time: t, Payload: m.Payload, Properties: m.Properties,
			EventTime: unixMilli(m.EventTime), PublishTime: unixMilli(m.PublishTime)}
		wm.setID(m.ID)
		hk := wm.held()
		if h := w.held.holding(hk); h != nil {
			durable := h.durable
			// A copy of a message in hand (a redelivery): the original's
			// acknowledgement is the copy's too.
			switch {
			case durable && p.eo != nil:
				p.ack(&item{m: m}, Acked, "") // in a transaction, which gives its credit back
				continue
			case durable:
				_ = p.cons.Ack(context.Background(), m)
			default:
				w.keepCopy(hk, m)
			}
			// Received again, it settles again (with its original), as a
			// redelivery does without windows: else InFlight keeps it.
			p.stats.acked.Add(1)
			p.credits.release(1)
			continue
		}
		// Late or not by the watermark of the messages before it, in the
		// order they came.
		arrived := w.arrived.at(now)
		if w.a.isLate(t, arrived) && w.addedBefore(wm, m) {
			p.ack(&item{m: m}, Acked, "") // a copy (window_exactly.go)
			continue
		}
		if w.a.isLate(t, arrived) && !w.mayJoinSession(m.Key) {
			w.isLate(&item{m: m}, arrived)
			continue
		}
		w.arrived.observe(m.Topic, t, now)
		wm.Horizon = satSub(arrived, w.a.late)
		if w.incr {
			w.takeIncr(wm, pm, m)
			continue
		}
		rec := wm.record()
		w.held.hold(wm)
		w.writing[wm.Key]++
		w.placed.take(t)
		b := appendWinMsg(make([]byte, 0, winMsgSize(wm)), wm)
		sub := w.gen
		p.client.PublishAsync(p.hard, w.topic, pool.Message{Key: rec, Payload: b}, func(_ pulsarwire.MessageID, err error) {
			w.mu.Lock()
			if w.stale(sub) {
				w.mu.Unlock()
				p.handBack(&item{m: m}) // it comes again, to the windows read back
				return
			}
			w.durable = append(w.durable, durableMsg{wm: wm, m: m, err: err})
			w.mu.Unlock()
			w.kick()
		})
	}
	if w.incr {
		w.sendSegment()
	}
}

// idTexts is the text of ms's ids, one after the other (each ends at
// w.idEnds[i]): made as one string, one allocation a receive rather than
// one a message (BenchmarkWindowCount).
func (w *windower) idTexts(ms []*subscribe.Message) string {
	b := w.idBuf[:0]
	w.idEnds = w.idEnds[:0]
	for _, m := range ms {
		b = m.ID.AppendText(b)
		w.idEnds = append(w.idEnds, len(b))
	}
	w.idBuf = b
	return string(b)
}

// satSub is a-b, staying at math.MinInt64 for "no watermark yet".
func satSub(a, b int64) int64 {
	if a == math.MinInt64 {
		return a
	}
	return a - b
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// answered is told by settle that a window's item was answered: ok
// (its outputs published, or dead-lettered, or dropped), or to be
// handed over again after delay.
func (w *windower) answered(f *windowFire, ok bool, delay time.Duration) {
	if f.add != nil && f.fire > 0 {
		w.addFireSettled(f, ok, delay)
		return
	}
	if f.add != nil {
		w.addSettled(f, ok, delay)
		return
	}
	w.mu.Lock()
	if !w.stale(f.sub) {
		w.done = append(w.done, fireDone{key: f.key, start: f.start, fire: f.fire, n: f.n, replaces: f.replaces, ok: ok, delay: delay})
	}
	w.mu.Unlock()
	w.kick()
}

func (w *windower) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wait waits until something is queued for process, or a tick; false
// when ctx ends.
func (w *windower) wait(ctx context.Context) bool {
	t := time.NewTimer(windowTick)
	defer t.Stop()
	select {
	case <-w.wake:
	case <-t.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// process places the messages whose writes have their receipts, records
// the windows answered, and returns the windows due, as items for the
// handler. It runs on the receive goroutine.
func (w *windower) process(now time.Time) []*item {
	p := w.p
	w.mu.Lock()
	durable, done, addsDone, segs, acks := w.durable, w.done, w.addsDone, w.segsDone, w.acksDone
	w.durable, w.done, w.addsDone, w.segsDone, w.acksDone = nil, nil, nil, nil, nil
	marks := w.pinMarks
	w.pinMarks = nil
	var writes []accWrite
	if !w.writerOn.Load() {
		writes, w.accWrites = w.accWrites, nil
	}
	w.mu.Unlock()
	for _, aw := range writes {
		w.publishAcc(aw.f, aw.rec)
	}
	w.releaseAcked(acks)
	w.unpinMarked(marks, now)
	if w.incr {
		w.processAdds(addsDone, now)
		for _, d := range segs {
			w.placeSegment(d, now)
		}
	}
	for _, d := range durable {
		w.placed.placed(d.wm.Time)
		hk := d.wm.held()
		it := &item{m: w.latest(hk, d.m)}
		if w.writing[d.wm.Key]--; w.writing[d.wm.Key] <= 0 {
			delete(w.writing, d.wm.Key)
		}
		if d.err != nil {
			// Not durable: it comes again.
			w.held.unhold(d.wm)
			p.log.Warn("windows: a message could not be written to the changelog; it comes again", "id", d.wm.ID, "err", d.err)
			p.nackAfter(it, p.cfg.ErrorPolicy.Backoff.Delay(1))
			p.settled(it, Retried, "window changelog: "+d.err.Error())
			continue
		}
		placed := w.placed.at(now)
		if w.sessionLate(d.wm) {
			w.held.unhold(d.wm)
			w.p.client.PublishAsync(p.hard, w.topic, tombstone(d.wm.record()), func(pulsarwire.MessageID, error) {})
			w.isLate(it, satAdd(d.wm.Horizon, w.a.late))
			continue
		}
		w.insert(d.wm)
		w.open.Add(1)
		d.wm.durable = true // in held since take
		w.placed.observe(d.wm.Topic, d.wm.Time, now)
		w.nextCheck = min(w.nextCheck, w.a.firstEnd(d.wm.Time))
		if w.a.late > 0 && d.wm.Time < placed {
			w.dirty[d.wm.Key] = true // into a window that may have fired
		}
		w.counted(hk, unackedIn{msg: d.wm})
		p.ack(it, Acked, "")
	}
	for _, d := range done {
		k := w.keys[d.key]
		if k == nil {
			continue
		}
		ws := k.wins[d.start]
		if ws == nil {
			continue
		}
		ws.inflight = false
		w.dirty[d.key] = true
		if !d.ok {
			ws.retryAt = now.Add(d.delay)
			continue
		}
		ws.fires, ws.n = d.fire, d.n
		switch {
		case w.p.eo != nil: // in the fire's transaction (settleIn)
		case w.incr:
			if a := k.accs[d.start]; a != nil {
				w.markAcc(d.key, d.start, a, ws)
			}
		default:
			w.mark(d.key, d.start, ws)
		}
		// The sessions it took in are its own now: their records go
		// after its own is written.
		var gone []string
		for _, r := range d.replaces {
			if o := k.wins[r]; o != nil && !o.inflight {
				delete(k.wins, r)
				gone = append(gone, firedRecord(d.key, r))
			}
		}
		w.forget(gone)
	}
	w.arrived.at(now) // the clock moves idle partitions on
	wm := w.placed.at(now)
	var fires []*item
	switch {
	case w.rescan || wm >= w.nextCheck:
		fires = w.scan(wm, now)
	case len(w.dirty) > 0:
		fires = w.scanDirty(wm, now)
	}
	if w.incr {
		// The adds first: a window's add goes before its fire.
		return append(w.incrTail(now), fires...)
	}
	return fires
}

// scanDirty is scan for the keys marked dirty only.
func (w *windower) scanDirty(wm int64, now time.Time) []*item {
	dirty := w.dirty
	w.dirty = map[string]bool{}
	var fires []*item
	var gone []string
	for key := range dirty {
		if k := w.keys[key]; k != nil {
			fires, gone = w.scanKey(key, k, wm, now, fires, gone)
			if len(k.msgs) == 0 && len(k.wins) == 0 && len(k.accs) == 0 {
				delete(w.keys, key)
			}
		}
	}
	w.forget(gone)
	return fires
}

// mark writes window start of key's fired record.
func (w *windower) mark(key string, start int64, ws *winState) {
	f := firedMark{fires: ws.fires, n: ws.n, forgotten: ws.forgotten}
	w.p.client.PublishAsync(w.p.hard, w.topic, pool.Message{Key: firedRecord(key, start), Payload: []byte(f.String())},
		func(pulsarwire.MessageID, error) {})
}

// isLate sends a late message to the late topic, or drops it.
func (w *windower) isLate(it *item, wm int64) {
	p := w.p
	w.late.Add(1)
	if w.cfg.LateTopic == "" {
		p.ack(it, Dropped, "late")
		return
	}
	if p.eo != nil {
		w.lateTxn(it, wm)
		return
	}
	m := subscribe.DeadLetter(it.m, map[string]string{PropertyLate: strconv.FormatInt(wm, 10)})
	p.client.PublishAsync(p.hard, w.cfg.LateTopic, m, func(_ pulsarwire.MessageID, err error) {
		if err != nil {
			p.nackAfter(it, p.cfg.ErrorPolicy.Backoff.Delay(1))
			p.settled(it, Retried, "late topic: "+err.Error())
			return
		}
		p.ack(it, Dropped, "late")
	})
}

// scan fires the windows the watermark passed, and forgets those past
// their lateness, with their messages.
func (w *windower) scan(wm int64, now time.Time) []*item {
	w.rescan = false
	w.nextCheck = math.MaxInt64
	clear(w.dirty)
	var fires []*item
	var gone []string
	for key, k := range w.keys {
		fires, gone = w.scanKey(key, k, wm, now, fires, gone)
		if len(k.msgs) == 0 && len(k.wins) == 0 && len(k.accs) == 0 {
			delete(w.keys, key)
		}
	}
	w.forget(gone)
	return fires
}

// forget removes the records of gone from the changelog.
func (w *windower) forget(gone []string) {
	if len(gone) > 0 && w.incr {
		// Once no segment written before can hold a message of them
		// (release).
		w.deferred = append(w.deferred, deferredGone{seq: w.segSeq, recs: gone})
		return
	}
	if len(gone) > 0 {
		// The watermarks first: a restart that finds the records gone
		// finds the watermark that let them go.
		for t, pt := range w.placed.parts {
			if pt.max != math.MinInt64 {
				w.p.client.PublishAsync(w.p.hard, w.topic, pool.Message{Key: recWatermark + t, Payload: []byte(strconv.FormatInt(pt.max, 10))},
					func(pulsarwire.MessageID, error) {})
			}
		}
	}
	if len(gone) > 0 {
		for _, rec := range gone {
			w.p.client.PublishAsync(w.p.hard, w.topic, tombstone(rec), func(pulsarwire.MessageID, error) {})
		}
	}
}

// span is one window of a key's messages.
type span struct {
	start, end int64
	msgs       []*winMsg
}

// spans are the windows key k's messages make.
func (w *windower) spans(k *winKey) []span {
	if w.a.kind == pipelines.Session {
		out, _ := w.sessions(k.msgs)
		return out
	}
	by := map[int64]*span{}
	for _, m := range k.msgs {
		for _, s := range w.a.starts(m.Time) {
			if s+w.a.size <= m.Horizon {
				continue // forgotten when m came
			}
			sp := by[s]
			if sp == nil {
				sp = &span{start: s, end: s + w.a.size}
				by[s] = sp
			}
			sp.msgs = append(sp.msgs, m)
		}
	}
	out := make([]span, 0, len(by))
	for _, sp := range by {
		out = append(out, *sp)
	}
	return out
}

func (w *windower) scanKey(key string, k *winKey, wm int64, now time.Time, fires []*item, gone []string) ([]*item, []string) {
	if w.incr {
		return w.scanKeyIncr(key, k, wm, now, fires, gone)
	}
	spans := w.spans(k)
	var drop map[*winMsg]bool // a forgotten session's messages
	newly := 0
	if w.a.kind == pipelines.Session {
		// Late messages read back from a changelog whose removal of them
		// was lost.
		if _, late := w.sessions(k.msgs); len(late) > 0 {
			drop = map[*winMsg]bool{}
			for _, m := range late {
				drop[m] = true
			}
			newly++
		}
	}
	if w.freed[key] {
		// A message kept for its acknowledgement may go now.
		delete(w.freed, key)
		newly++
	}
	var fresh []int64 // forgotten in this scan
	for i := range spans {
		sp := &spans[i]
		ws := k.wins[sp.start]
		if ws != nil && ws.inflight {
			continue // looked at again once answered (dirty)
		}
		if ws != nil && ws.forgotten {
			continue
		}
		fired := ws != nil && ws.fires > 0
		dirty := fired && ws.n != len(sp.msgs)
		var replaces []int64
		base := 0 // fires so far, of it and the sessions it took in
		if ws != nil {
			base = ws.fires
		}
		if w.a.kind == pipelines.Session {
			var busy bool
			replaces, base, busy = takenIn(k, sp, base)
			if busy {
				continue // looked at again once answered (dirty)
			}
			if len(replaces) > 0 {
				fired, dirty = true, true
			}
		}
		switch {
		case sp.end <= wm && (!fired || dirty):
			if ws == nil {
				w.seq++
				ws = &winState{id: w.seq}
				k.wins[sp.start] = ws
			}
			if now.Before(ws.retryAt) {
				w.dirty[key] = true
				continue
			}
			fires = append(fires, w.fireItem(key, sp, ws, base, replaces))
		case fired && sp.end+w.a.late <= wm:
			ws.forgotten = true
			newly++
			fresh = append(fresh, sp.start)
			if w.a.kind == pipelines.Session {
				if drop == nil {
					drop = map[*winMsg]bool{}
				}
				for _, m := range sp.msgs {
					drop[m] = true
				}
			}
		case !fired || dirty:
			// A session a late message made longer fires again at its
			// new end.
			w.nextCheck = min(w.nextCheck, sp.end)
		default:
			w.nextCheck = min(w.nextCheck, sp.end+w.a.late)
		}
	}
	if newly == 0 {
		return fires, gone
	}
	// A message goes once every window it is in is forgotten.
	kept := k.msgs[:0]
	for _, m := range k.msgs {
		if w.spent(k, m, drop) {
			gone = append(gone, m.record())
			w.held.unhold(m)
			w.open.Add(-1)
			continue
		}
		kept = append(kept, m)
	}
	clear(k.msgs[len(kept):])
	k.msgs = kept
	// A forgotten window is kept while a message left falls in it, so
	// that it is not made again; then its record goes too.
	covered := map[int64]bool{}
	left := w.spans(k)
	for _, sp := range left {
		covered[sp.start] = true
	}
	for start, ws := range k.wins {
		if !covered[start] && !ws.inflight && !(w.a.kind == pipelines.Session && within(left, start)) {
			// Forgotten, or a session that grew a new start.
			if ws.fires > 0 {
				gone = append(gone, firedRecord(key, start))
			}
			delete(k.wins, start)
		}
	}
	for _, start := range fresh {
		if ws := k.wins[start]; ws != nil {
			w.mark(key, start, ws)
		}
	}
	return fires, gone
}

// spent says whether every window m is in is forgotten.
func (w *windower) spent(k *winKey, m *winMsg, drop map[*winMsg]bool) bool {
	if w.a.kind == pipelines.Session {
		// Sessions do not overlap.
		if drop[m] || m.dropLater {
			m.dropLater = m.unacked // it may come again (window_exactly.go)
			return !m.unacked
		}
		return false
	}
	if m.unacked {
		return false // it may come again (window_exactly.go)
	}
	for _, s := range w.a.starts(m.Time) {
		if s+w.a.size <= m.Horizon {
			continue // never in it
		}
		if ws := k.wins[s]; ws == nil || !ws.forgotten {
			return false
		}
	}
	return true
}

// fireItem makes the item that hands window sp of key to the handler.
func (w *windower) fireItem(key string, sp *span, ws *winState, base int, replaces []int64) *item {
	ws.inflight = true
	fire := base + 1
	msgs := slices.Clone(sp.msgs)
	slices.SortStableFunc(msgs, func(a, b *winMsg) int { return cmp.Compare(a.Time, b.Time) })
	size := 128
	for _, m := range msgs {
		size += winMsgSize(m)
	}
	b := appendWindowPayload(make([]byte, 0, size), &windowPayload{Key: key, Start: sp.start, End: sp.end, Fire: fire, Messages: msgs, Replaces: replaces})
	m := &subscribe.Message{
		ID:    pulsarwire.MessageID{Ledger: 1 << 62, Entry: ws.id, Partition: -1, BatchIndex: -1},
		Topic: w.srcTopic, Key: key, Payload: b,
		Properties: map[string]string{
			PropertyWindowStart: strconv.FormatInt(sp.start, 10),
			PropertyWindowEnd:   strconv.FormatInt(sp.end, 10),
			PropertyWindowFire:  strconv.Itoa(fire),
		},
		PublishTime: time.UnixMilli(sp.end), EventTime: time.UnixMilli(sp.end - 1),
	}
	return &item{m: m, win: &windowFire{key: key, start: sp.start, fire: fire, n: len(sp.msgs), replaces: replaces, sub: w.gen}}
}
