package runtime

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// The incremental mode of windows (docs/pipelines.md, "Incremental
// windows"): the host keeps one accumulator per key and window, bytes
// the handler owns. A message joins the windows it falls in as one of
// their pending messages; each window's pending messages go to the
// handler's add step with the accumulator (one add in flight a window),
// and the accumulator it answers with is written to the changelog in
// place of the messages. A message is acknowledged once every window it
// joined has its accumulator's record back. The record holds, for each
// partition, the newest message added: a redelivered copy at or before
// it is not added again (a window's messages of one partition come in
// order, on the Exclusive subscription windows need).

// maxAdd is the most messages one add step gets.
const maxAdd = 256

// addLedger marks the ids of add calls, beside those of fires (1<<62).
const addLedger = 1<<62 + 1

// winAcc is one window's accumulator and what waits to join it.
type winAcc struct {
	acc     []byte
	n       int               // messages added
	hw      map[string]msgPos // per topic, the newest message added
	pending []*pendMsg
	adding  bool
	retryAt time.Time
	id      uint64
}

// pendMsg is a message in hand, waiting for refs windows' adds.
type pendMsg struct {
	wm   *winMsg
	m    *subscribe.Message
	pos  msgPos
	refs int
}

// inOrder is a partition's messages in hand in the order they came. A
// message is acknowledged once it and every one before it were added
// and the partition's newest time over them (safe) is in the changelog
// (w|<topic>): a restart then reads back the watermark as it was when
// the first message it gets again came, and decides what is late, and
// which windows a message joins, as the host before did.
type inOrder struct {
	q    []*pendMsg
	safe int64
}

// msgPos orders the messages of one partition.
type msgPos [3]int64

func posOf(id pulsarwire.MessageID) msgPos {
	return msgPos{int64(id.Ledger), int64(id.Entry), int64(id.BatchIndex)}
}

func (a msgPos) after(b msgPos) bool {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c > 0
	}
	if c := cmp.Compare(a[1], b[1]); c != 0 {
		return c > 0
	}
	return a[2] > b[2]
}

// accRecord is an accumulator's changelog record (a|<start>|<key>).
type accRecord struct {
	Acc []byte            `json:"acc,omitempty"`
	N   int               `json:"n"`
	HW  map[string]msgPos `json:"hw,omitempty"`
}

const recAcc = "a|"

func accRecordKey(key string, start int64) string {
	return recAcc + strconv.FormatInt(start, 10) + "|" + key
}

// addCall is what an add item carries: its messages, and the window's
// accumulator record as it was when the add was made.
type addCall struct {
	msgs []*pendMsg
	base accRecord
}

type addDone struct {
	f     *windowFire
	added bool // the handler's accumulator is in the changelog
	rec   accRecord
	err   error
	ok    bool
	delay time.Duration
}

type winID2 struct {
	key   string
	start int64
}

func (k *winKey) accOf(start int64, w *windower) *winAcc {
	if k.accs == nil {
		k.accs = map[int64]*winAcc{}
	}
	a := k.accs[start]
	if a == nil {
		w.seq++
		a = &winAcc{id: w.seq}
		k.accs[start] = a
	}
	return a
}

// takeIncr has wm (of m, neither late nor held) join its windows.
func (w *windower) takeIncr(wm *winMsg, m *subscribe.Message) {
	pm := &pendMsg{wm: wm, m: m, pos: posOf(m.ID)}
	k := w.key(wm.Key)
	for _, s := range w.a.starts(wm.Time) {
		if s+w.a.size <= wm.Horizon {
			continue // forgotten when m came
		}
		a := k.accOf(s, w)
		if hw, ok := a.hw[wm.Topic]; ok && !pm.pos.after(hw) {
			continue // added before: a redelivered copy
		}
		a.pending = append(a.pending, pm)
		pm.refs++
		w.adds[winID2{wm.Key, s}] = true
	}
	w.held[wm.record()] = false
	w.open.Add(1)
	q := w.order[wm.Topic]
	if q == nil {
		q = &inOrder{safe: math.MinInt64}
		w.order[wm.Topic] = q
	}
	q.q = append(q.q, pm)
	if pm.refs == 0 {
		// Every window it falls in has it (a copy): placed, and
		// acknowledged in turn.
		w.placed.observe(wm.Topic, wm.Time, time.Now())
		w.nextCheck = min(w.nextCheck, w.a.firstEnd(wm.Time))
		w.advance(wm.Topic, q)
	}
}

// advance acknowledges the messages of topic at the head of q that were
// added, once the newest time over them is in the changelog.
func (w *windower) advance(topic string, q *inOrder) {
	n := 0
	for n < len(q.q) && q.q[n].refs == 0 {
		q.safe = max(q.safe, q.q[n].wm.Time)
		n++
	}
	if n == 0 {
		return
	}
	done := slices.Clone(q.q[:n])
	clear(q.q[:n])
	q.q = q.q[n:]
	for _, pm := range done {
		delete(w.held, pm.wm.record())
	}
	w.open.Add(-int64(n))
	p := w.p
	p.client.PublishAsync(p.hard, w.topic, pool.Message{Key: recWatermark + topic, Payload: []byte(strconv.FormatInt(q.safe, 10))},
		func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				// Not acknowledged: they come again, and are not added twice.
				p.log.Warn("windows: a watermark could not be written to the changelog; its messages come again", "topic", topic, "err", err)
				for _, pm := range done {
					it := &item{m: pm.m}
					p.nackAfter(it, p.cfg.ErrorPolicy.Backoff.Delay(1))
					p.settled(it, Retried, "window changelog: "+err.Error())
				}
				return
			}
			for _, pm := range done {
				p.ack(&item{m: pm.m}, Acked, "")
			}
		})
}

// addAnswered is told by settle that the handler answered an add with
// its new accumulator (nil: unchanged); it writes the accumulator's
// record, and the windows learn of it with the receipt.
func (w *windower) addAnswered(it *item, change *plugin.StateChange) {
	f := it.win
	w.mu.Lock()
	stale := w.stale(f.sub)
	w.mu.Unlock()
	if stale {
		// Its base may be older than what another host wrote meanwhile:
		// not written; its messages come again (window_regain.go).
		w.p.settled(it, Retried, "the subscription was lost and made again")
		return
	}
	rec := f.add.base
	if change != nil {
		rec.Acc = change.Value
		if change.Delete {
			rec.Acc = nil
		}
	}
	rec.N += len(f.add.msgs)
	rec.HW = maps.Clone(rec.HW)
	if rec.HW == nil {
		rec.HW = map[string]msgPos{}
	}
	for _, pm := range f.add.msgs {
		if hw, ok := rec.HW[pm.wm.Topic]; !ok || pm.pos.after(hw) {
			rec.HW[pm.wm.Topic] = pm.pos
		}
	}
	b := appendAccRecord(make([]byte, 0, 64+len(rec.Acc)*4/3+len(rec.HW)*(len(w.srcTopic)+64)), &rec)
	w.p.client.PublishAsync(w.p.hard, w.topic, pool.Message{Key: accRecordKey(f.key, f.start), Payload: b},
		func(_ pulsarwire.MessageID, err error) {
			w.mu.Lock()
			if !w.stale(f.sub) {
				w.addsDone = append(w.addsDone, addDone{f: f, added: true, rec: rec, err: err, ok: true})
			}
			w.mu.Unlock()
			w.kick()
		})
	w.p.settled(it, Acked, "")
}

// addSettled is answered for an add that was not added: ok when its
// messages were dead-lettered or dropped, else to be made again after
// delay.
func (w *windower) addSettled(f *windowFire, ok bool, delay time.Duration) {
	w.mu.Lock()
	if !w.stale(f.sub) {
		w.addsDone = append(w.addsDone, addDone{f: f, ok: ok, delay: delay})
	}
	w.mu.Unlock()
	w.kick()
}

// processAdds acts on the adds answered, and returns the adds to make.
func (w *windower) processAdds(done []addDone, now time.Time) []*item {
	p := w.p
	// The partitions whose messages the adds finished: each advances
	// once for all of them, one watermark record, not one an add.
	topics := map[string]bool{}
	for _, d := range done {
		f := d.f
		k := w.keys[f.key]
		if k == nil || k.accs[f.start] == nil {
			continue // made before the windows were read back (window_regain.go)
		}
		a := k.accs[f.start]
		a.adding = false
		w.adds[winID2{f.key, f.start}] = true
		w.dirty[f.key] = true
		w.nextCheck = min(w.nextCheck, f.start+w.a.size)
		if d.err != nil {
			// The accumulator in the changelog is the one before: the
			// messages come again to a restart, which reads it back.
			p.fail(fmt.Errorf("windows: an accumulator could not be written to the changelog: %w", d.err))
			a.pending = append(f.add.msgs, a.pending...)
			continue
		}
		if !d.ok {
			a.retryAt = now.Add(d.delay)
			a.pending = append(f.add.msgs, a.pending...)
			continue
		}
		if d.added {
			a.acc, a.n, a.hw = d.rec.Acc, d.rec.N, d.rec.HW
		}
		for _, pm := range f.add.msgs {
			if pm.refs--; pm.refs == 0 {
				w.placed.observe(pm.wm.Topic, pm.wm.Time, now)
				topics[pm.wm.Topic] = true
			}
		}
	}
	for t := range topics {
		if q := w.order[t]; q != nil {
			w.advance(t, q)
		}
	}
	var items []*item
	for id := range w.adds {
		k := w.keys[id.key]
		var a *winAcc
		if k != nil {
			a = k.accs[id.start]
		}
		if a == nil || a.adding || len(a.pending) == 0 {
			delete(w.adds, id)
			continue
		}
		if now.Before(a.retryAt) {
			continue
		}
		delete(w.adds, id)
		items = append(items, w.addItem(id.key, id.start, a))
	}
	return items
}

// addItem makes the item that hands the pending messages of window
// start of key to the handler's add step.
func (w *windower) addItem(key string, start int64, a *winAcc) *item {
	n := min(len(a.pending), maxAdd)
	msgs := a.pending[:n:n]
	a.pending = a.pending[n:]
	a.adding = true
	wms := make([]*winMsg, n)
	for i, pm := range msgs {
		wms[i] = pm.wm
	}
	end := start + w.a.size
	size := 128 + len(a.acc)*4/3
	for _, m := range wms {
		size += winMsgSize(m)
	}
	b := appendWindowPayload(make([]byte, 0, size), &windowPayload{Key: key, Start: start, End: end, Messages: wms, Add: true, Accumulator: a.acc})
	m := &subscribe.Message{
		ID:    pulsarwire.MessageID{Ledger: addLedger, Entry: a.id, Partition: -1, BatchIndex: -1},
		Topic: w.srcTopic, Key: accStateKey(key, start), Payload: b,
		Properties: map[string]string{
			PropertyWindowStart: strconv.FormatInt(start, 10),
			PropertyWindowEnd:   strconv.FormatInt(end, 10),
			PropertyWindowAdd:   strconv.Itoa(n),
		},
		PublishTime: time.UnixMilli(end), EventTime: time.UnixMilli(end - 1),
	}
	return &item{m: m, win: &windowFire{key: key, start: start, add: &addCall{msgs: msgs,
		base: accRecord{Acc: a.acc, N: a.n, HW: a.hw}}, acc: a.acc, sub: w.p.readAt}}
}

// accStateKey is the key an add's message has, under which its
// accumulator goes as keyed state: one per window.
func accStateKey(key string, start int64) string { return strconv.FormatInt(start, 10) + "|" + key }

// windowAddEntries are the accumulators of a batch's adds, sent as the
// keyed state of their messages; nil when the batch has none.
func windowAddEntries(items []*item) []plugin.StateEntry {
	var es []plugin.StateEntry
	for _, it := range items {
		if it.win != nil && it.win.add != nil {
			es = append(es, plugin.StateEntry{Key: it.m.Key, Value: it.win.acc})
		}
	}
	return es
}

// scanKeyIncr is scanKey for accumulators: a window fires once the
// watermark passes its end and nothing waits to join it; it goes, with
// its records, once it is past its lateness.
func (w *windower) scanKeyIncr(key string, k *winKey, wm int64, now time.Time, fires []*item, gone []string) ([]*item, []string) {
	for start, a := range k.accs {
		end := start + w.a.size
		ws := k.wins[start]
		if ws != nil && ws.inflight {
			continue // looked at again once answered (dirty)
		}
		if a.adding || len(a.pending) > 0 {
			continue // looked at again once added (dirty)
		}
		fired := ws != nil && ws.fires > 0
		dirty := fired && ws.n != a.n
		switch {
		case a.n > 0 && end <= wm && (!fired || dirty):
			if ws == nil {
				w.seq++
				ws = &winState{id: w.seq}
				k.wins[start] = ws
			}
			if now.Before(ws.retryAt) {
				w.dirty[key] = true
				continue
			}
			fires = append(fires, w.fireIncr(key, start, a, ws))
		case end+w.a.late <= wm:
			// Fired, or nothing was added (its adds dead-lettered):
			// forgotten. A message for it now is late by its horizon.
			gone = append(gone, accRecordKey(key, start))
			if fired {
				gone = append(gone, firedRecord(key, start))
			}
			delete(k.accs, start)
			delete(k.wins, start)
		case !fired && a.n > 0:
			w.nextCheck = min(w.nextCheck, end)
		default:
			w.nextCheck = min(w.nextCheck, end+w.a.late)
		}
	}
	return fires, gone
}

// fireIncr makes the item that hands window start of key, its
// accumulator, to the handler.
func (w *windower) fireIncr(key string, start int64, a *winAcc, ws *winState) *item {
	ws.inflight = true
	fire := ws.fires + 1
	end := start + w.a.size
	b := appendWindowPayload(make([]byte, 0, 128+len(a.acc)*4/3), &windowPayload{Key: key, Start: start, End: end, Fire: fire, Messages: []*winMsg{}, Accumulator: a.acc})
	m := &subscribe.Message{
		ID:    pulsarwire.MessageID{Ledger: 1 << 62, Entry: ws.id, Partition: -1, BatchIndex: -1},
		Topic: w.srcTopic, Key: key, Payload: b,
		Properties: map[string]string{
			PropertyWindowStart: strconv.FormatInt(start, 10),
			PropertyWindowEnd:   strconv.FormatInt(end, 10),
			PropertyWindowFire:  strconv.Itoa(fire),
		},
		PublishTime: time.UnixMilli(end), EventTime: time.UnixMilli(end - 1),
	}
	return &item{m: m, win: &windowFire{key: key, start: start, fire: fire, n: a.n, sub: w.p.readAt}}
}

// restoreAccs puts the accumulators read back in their windows.
func (w *windower) restoreAccs(accs map[string]map[int64]accRecord, now time.Time) {
	for key, rs := range accs {
		k := w.key(key)
		for start, r := range rs {
			a := k.accOf(start, w)
			a.acc, a.n, a.hw = r.Acc, r.N, r.HW
		}
	}
}

// parseAcc reads an a|<start>|<key> record.
func parseAcc(k string, v []byte) (key string, start int64, r accRecord, ok bool) {
	startS, key, ok := strings.Cut(k[len(recAcc):], "|")
	if !ok {
		return "", 0, r, false
	}
	start, err := strconv.ParseInt(startS, 10, 64)
	if err != nil || json.Unmarshal(v, &r) != nil {
		return "", 0, r, false
	}
	if r.HW == nil {
		r.HW = map[string]msgPos{}
	}
	return key, start, r, true
}
