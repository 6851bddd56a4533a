package subscribe

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// acker groups acknowledgements: individual ones by part into one ACK
// command each, cumulative ones keeping the highest per part. A part
// that is reconnecting keeps its acknowledgements until it is back (they
// go out before its permits are granted).
type acker struct {
	c *Consumer

	mu      sync.Mutex
	pending []ackReq
	// msgs counts the messages of pending that a flush would send: an
	// entry counts each message of its batch, as the broker's unacked
	// limit does (50,000 a consumer on Apache Pulsar). Counting entries
	// instead let a consumer of 1000-message batches hold 50,000
	// acknowledged messages back for the whole AckGroupTime and stall at
	// that limit every 100 ms. Acknowledgements held for a part that is
	// reconnecting are left out: they go when the part is back, and
	// counted they would make every add flush until then.
	msgs   int
	cum    map[*partConsumer]entryPos
	ids    []pb.MessageIdData // reused for each ACK command
	vals   []uint64
	idPtrs []*pb.MessageIdData
}

type ackReq struct {
	pc  *partConsumer
	pos entryPos
	n   int32 // messages the entry holds
}

var (
	individual = pb.CommandAck_Individual.Enum()
	cumulative = pb.CommandAck_Cumulative.Enum()
)

// add groups the acknowledgement of the entry at pos, which holds n
// messages.
func (a *acker) add(pc *partConsumer, pos entryPos, n int32) {
	a.mu.Lock()
	a.pending = append(a.pending, ackReq{pc, pos, max(n, 1)})
	a.msgs += int(max(n, 1))
	full := a.msgs >= a.c.opts.AckGroupSize || a.c.opts.AckGroupTime < 0
	a.mu.Unlock()
	if full {
		a.flush()
	}
}

func (a *acker) cumulative(pc *partConsumer, pos entryPos) {
	a.mu.Lock()
	if cur, ok := a.cum[pc]; !ok || pos.compare(cur) > 0 {
		a.cum[pc] = pos
	}
	a.mu.Unlock()
}

// flush sends every grouped acknowledgement whose part is connected.
func (a *acker) flush() { a.flushWhere(nil) }

// flushPart sends the grouped acknowledgements of pc.
func (a *acker) flushPart(pc *partConsumer) { a.flushWhere(pc) }

func (a *acker) flushWhere(only *partConsumer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) > 0 {
		slices.SortFunc(a.pending, func(x, y ackReq) int {
			if c := cmp.Compare(x.pc.id, y.pc.id); c != 0 {
				return c
			}
			return x.pos.compare(y.pos)
		})
		// An entry acknowledged twice (it came again) is sent and counted once.
		a.pending = slices.CompactFunc(a.pending, func(x, y ackReq) bool { return x.pc == y.pc && x.pos == y.pos })
		kept, msgs := a.pending[:0], 0
		for i := 0; i < len(a.pending); {
			pc := a.pending[i].pc
			j := i + 1
			for j < len(a.pending) && a.pending[j].pc == pc {
				j++
			}
			group := a.pending[i:j]
			switch {
			case only != nil && pc != only:
				kept = append(kept, group...)
				for _, r := range group {
					msgs += int(r.n)
				}
			case !a.sendLocked(pc, individual, group):
				kept = append(kept, group...) // held, not counted
			}
			i = j
		}
		clear(a.pending[len(kept):])
		a.pending = kept
		a.msgs = msgs
	}
	for pc, pos := range a.cum {
		if only != nil && pc != only {
			continue
		}
		if a.sendLocked(pc, cumulative, []ackReq{{pc, pos, 1}}) {
			delete(a.cum, pc)
		}
	}
}

// sendLocked sends one ACK command for group, sorted and without
// duplicates; false when pc is not connected. Acknowledgements of a
// closed part are dropped.
func (a *acker) sendLocked(pc *partConsumer, typ *pb.CommandAck_AckType, group []ackReq) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.closed {
		return true
	}
	s := pc.sess
	if s == nil {
		return false
	}
	n := len(group)
	if cap(a.ids) < n {
		a.ids = make([]pb.MessageIdData, n)
		a.vals = make([]uint64, 2*n)
		a.idPtrs = make([]*pb.MessageIdData, n)
	}
	for k, r := range group {
		a.vals[2*k], a.vals[2*k+1] = r.pos.ledger, r.pos.entry
		id := &a.ids[k]
		id.Reset()
		id.LedgerId, id.EntryId = &a.vals[2*k], &a.vals[2*k+1]
		a.idPtrs[k] = id
	}
	id := pc.id
	// Send encodes at once, so the reused ids are free again when it returns.
	s.conn.Send(pulsarwire.Wrap(&pb.CommandAck{ConsumerId: &id, AckType: typ, MessageId: a.idPtrs[:n]}))
	return true
}

// sendNow sends one acknowledgement and waits for the broker's answer.
func (a *acker) sendNow(ctx context.Context, pc *partConsumer, typ pb.CommandAck_AckType, pos entryPos) error {
	s := pc.session()
	if s == nil {
		return fmt.Errorf("ack on %s: not connected: %w", pc.topic, pulsarwire.ErrConnectionClosed)
	}
	_, err := s.conn.Request(ctx, pulsarwire.Wrap(&pb.CommandAck{
		ConsumerId: proto.Uint64(pc.id),
		AckType:    typ.Enum(),
		MessageId:  []*pb.MessageIdData{pos.wire()},
	}))
	if err != nil {
		return fmt.Errorf("ack %d:%d on %s: %w", pos.ledger, pos.entry, pc.topic, err)
	}
	return nil
}

// nacker holds negatively acknowledged entries until their delay is
// over, in a heap by deadline.
type nacker struct {
	kick chan struct{}

	mu    sync.Mutex
	items nackHeap
}

type nackItem struct {
	pc  *partConsumer
	pos entryPos
	at  time.Time
}

type nackHeap []nackItem

func (h nackHeap) Len() int           { return len(h) }
func (h nackHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h nackHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nackHeap) Push(x any)        { *h = append(*h, x.(nackItem)) }
func (h *nackHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nackItem{}
	*h = old[:len(old)-1]
	return it
}

func (n *nacker) add(pc *partConsumer, pos entryPos, delay time.Duration) {
	at := time.Now().Add(delay)
	n.mu.Lock()
	first := len(n.items) == 0 || at.Before(n.items[0].at)
	heap.Push(&n.items, nackItem{pc, pos, at})
	n.mu.Unlock()
	if first {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// due takes the items whose time came and says when the next one comes.
func (n *nacker) due(now time.Time) (out []nackItem, next time.Time, more bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(n.items) > 0 && !n.items[0].at.After(now) {
		out = append(out, heap.Pop(&n.items).(nackItem))
	}
	if len(n.items) == 0 {
		return out, time.Time{}, false
	}
	return out, n.items[0].at, true
}

// redeliver asks for the nacked entries again, part by part.
func (c *Consumer) redeliver(items []nackItem) {
	byPart := map[*partConsumer][]entryPos{}
	for _, it := range items {
		byPart[it.pc] = append(byPart[it.pc], it.pos)
	}
	for pc, ids := range byPart {
		// What was acknowledged must not come back with the rest.
		c.acks.flushPart(pc)
		if c.opts.Type.SingleActive() {
			pc.redeliverAll()
			continue
		}
		slices.SortFunc(ids, entryPos.compare)
		pc.redeliver(slices.Compact(ids))
	}
}

// housekeeper sends grouped acknowledgements every AckGroupTime and
// nacked entries' redeliveries when they are due.
func (c *Consumer) housekeeper() {
	var tick <-chan time.Time
	if c.opts.AckGroupTime > 0 {
		t := time.NewTicker(c.opts.AckGroupTime)
		defer t.Stop()
		tick = t.C
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick:
			c.acks.flush()
			continue
		case <-c.nacks.kick:
		case <-timer.C:
		}
		items, next, more := c.nacks.due(time.Now())
		if len(items) > 0 {
			c.redeliver(items)
		}
		if more {
			timer.Reset(time.Until(next))
		}
	}
}

// RedeliverUnacknowledged asks the brokers to send again everything they
// delivered to the consumer that is not acknowledged, its grouped
// acknowledgements sent first. It raises the consumer epoch, so what was
// received before is dropped here or, handed out already, reports
// Superseded: nothing comes out twice. Only on Exclusive and Failover
// subscriptions, where the broker sends again from the oldest
// unacknowledged message in order; elsewhere it returns
// ErrNotSingleActive and does nothing (nack the messages instead).
func (c *Consumer) RedeliverUnacknowledged() error {
	if !c.opts.Type.SingleActive() {
		return ErrNotSingleActive
	}
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	for _, pc := range c.partList() {
		c.acks.flushPart(pc)
		pc.redeliverAll()
	}
	return nil
}
