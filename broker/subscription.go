package broker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/store"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// subscription is a named cursor on a topic (subscription_cursor.go) and the consumers
// sharing it. One goroutine per subscription (run) dispatches, through
// the dispatcher of its kind (dispatcher.go).
type subscription struct {
	t       *topic
	name    string
	durable bool
	// readCompacted: its consumer reads the topic's compacted view below
	// the compaction horizon (topic_compaction.go); set by the last
	// consumer to subscribe (Exclusive and Failover only).
	readCompacted atomic.Bool

	wake    chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	started atomic.Bool
	stopMu  sync.Once
	saveMu  sync.Mutex // orders cursor writes

	mu          sync.Mutex
	cursor      // guarded by mu
	typ         pb.CommandSubscribe_SubType
	ksMode      pb.KeySharedMode
	consumers   []*consumer             // in arrival order
	active      *consumer               // Exclusive, Failover
	selector    ksSelector              // Key_Shared
	rr          int                     // Shared round robin
	owners      map[int32]*hashOwner    // Key_Shared: hashes with unacked entries, and who has them
	replayHash  map[uint64]int32        // Key_Shared: the hash of each replay entry
	hashReplays map[int32]int           // Key_Shared: how many replay entries each hash has
	notifyReq   chan struct{}           // ask run to tell consumers who is active
	handoverReq chan struct{}           // ask run to end a hand-over after FailoverDelay
	handover    bool                    // Failover: the new active consumer waits to take over
	delayed     map[uint64]delayedEntry // Shared/Key_Shared: entries held until deliver_at_time
	ahead       []store.Entry           // read past readPos and not sent yet (valid for aheadEpoch)
	aheadEpoch  uint64
	// readBuf and readEnts are the run goroutine's, reused by every round
	// that reads new entries: entries read from the files live in readBuf
	// until the next such read (ahead is used or dropped before it).
	readBuf     store.ReadBuffer
	readEnts    []store.Entry
	avgMsgs     float64 // mean messages per entry, to read as many entries as permits allow
	lastFlow    int64   // permits of the last FLOW, to size the read ahead of the next
	epoch       uint64  // bumped by a reset, to drop reads in flight
	deleted     bool
	keepEmpty   bool      // a non-durable subscription kept after a seek, for its reconnecting reader
	keptAt      time.Time // when keepEmpty was set
	consumerSeq uint64
	readErrs    int
	out         counter // dispatched, for the admin API
	// Acknowledgements held by transactions (subscription_txn.go).
	txnAcks map[uint64]pulsarwire.TxnID
	txnCum  *txnCumAck
}

type pendingEntry struct {
	c    *consumer
	msgs int32
	hash int32 // Key_Shared sticky-key hash, -1 otherwise
}

type delayedEntry struct {
	at   int64 // unix ms
	hash int32
}

type hashOwner struct {
	c *consumer
	n int
}

const (
	maxReadEntries = 256
	maxReadBytes   = 4 << 20
	// maxReplay bounds how many entries a Key_Shared subscription sets
	// aside for busy or draining consumers before it stops reading ahead.
	maxReplay = 10000
)

func newSubscription(t *topic, name string, durable bool, typ pb.CommandSubscribe_SubType, start uint64) *subscription {
	s := &subscription{
		t:           t,
		name:        name,
		durable:     durable,
		typ:         typ,
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		stopped:     make(chan struct{}),
		replayHash:  map[uint64]int32{},
		hashReplays: map[int32]int{},
		notifyReq:   make(chan struct{}, 1),
		handoverReq: make(chan struct{}, 1),
		delayed:     map[uint64]delayedEntry{},
		avgMsgs:     1,
	}
	s.cursor = newCursor(start, s)
	return s
}

func (s *subscription) start() {
	if s.started.Swap(true) {
		return
	}
	s.t.c.wg.Add(1)
	go s.run()
}

// stop ends the dispatcher and waits for it.
func (s *subscription) stop() {
	s.stopMu.Do(func() { close(s.quit) })
	if s.started.Load() {
		<-s.stopped
	}
}

func (s *subscription) wakeup() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) run() {
	defer s.t.c.wg.Done()
	defer close(s.stopped)
	var notify, handover *time.Timer
	var notifyC, handoverC <-chan time.Time
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	var delayC <-chan time.Time
	defer func() {
		if notify != nil {
			notify.Stop()
		}
		if handover != nil {
			handover.Stop()
		}
		delay.Stop()
	}()
	for {
		select {
		case <-s.quit:
			return
		case <-s.t.c.ctx.Done():
			return
		case <-s.notifyReq:
			if notifyC == nil {
				notify = time.NewTimer(activeNotifyDelay)
				notifyC = notify.C
			}
			continue
		case <-notifyC:
			notifyC = nil
			s.sendActive()
			continue
		case <-s.handoverReq:
			// As Apache Pulsar, a change during a hand-over does not
			// start the wait again.
			if handoverC == nil {
				handover = time.NewTimer(s.t.c.opts.FailoverDelay)
				handoverC = handover.C
			}
			continue
		case <-handoverC:
			handoverC = nil
			s.mu.Lock()
			s.handover = false
			s.mu.Unlock()
			s.sendActive()
		case <-delayC:
			delayC = nil
			s.releaseDue()
		case <-s.wake:
		}
		for s.dispatchOnce() {
			select {
			case <-s.quit:
				return
			default:
			}
		}
		if at := s.nextDue(); at > 0 {
			delay.Reset(time.Until(time.UnixMilli(at)))
			delayC = delay.C
		} else if delayC != nil {
			delay.Stop()
			delayC = nil
		}
	}
}

// nextDue is when the earliest delayed entry is due (0: none).
func (s *subscription) nextDue() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at int64
	for _, d := range s.delayed {
		if at == 0 || d.at < at {
			at = d.at
		}
	}
	return at
}

// releaseDue moves the delayed entries that are due to the replay queue.
func (s *subscription) releaseDue() {
	now := time.Now().UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, d := range s.delayed {
		if d.at <= now {
			delete(s.delayed, id)
			if !s.isAcked(id) {
				s.addReplay(id, d.hash)
			}
		}
	}
}

func (s *subscription) consumerCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.consumers)
}

// lowWater is the lowest entry the subscription may still need.
func (s *subscription) lowWater() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.markDelete
}

// backlog counts the entries not yet acknowledged.
func (s *subscription) backlog() int64 {
	next := s.t.log.Next()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor.backlog(next)
}

// ---------------------------------------------------------------- consumers

// addConsumer admits a consumer as Apache Pulsar does: a subscription has
// one type at a time; Exclusive takes one consumer (ConsumerBusy for the
// next); Key_Shared consumers must agree on the mode and, in STICKY mode,
// own disjoint hash ranges. It returns the consumers to tell about an
// active-consumer change (Failover), to be told after SUBSCRIBE's answer.
func (s *subscription) addConsumer(c *consumer) (activeNote, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return noteNone, pulsarwire.NewServerError(pb.ServerError_ServiceNotReady, "subscription is being deleted")
	}
	if len(s.consumers) > 0 && s.typ != c.typ {
		return noteNone, pulsarwire.NewServerError(pb.ServerError_ConsumerBusy, fmt.Sprintf("Subscription is of different type: it is %s, not %s", s.typ, c.typ))
	}
	if len(s.consumers) == 0 {
		s.typ = c.typ
		s.selector = nil
		if c.typ == pb.CommandSubscribe_Key_Shared {
			s.ksMode = c.ksMode
			if c.ksMode == pb.KeySharedMode_STICKY {
				s.selector = &stickySelector{}
			} else {
				s.selector = newRingSelector(s.t.c.opts.KeySharedReplicaPoints)
			}
			if s.owners == nil {
				s.owners = map[int32]*hashOwner{}
			}
		}
	}
	switch s.typ {
	case pb.CommandSubscribe_Exclusive:
		if len(s.consumers) > 0 {
			return noteNone, errExclusiveBusy
		}
	case pb.CommandSubscribe_Key_Shared:
		if c.ksMode != s.ksMode {
			return noteNone, pulsarwire.NewServerError(pb.ServerError_ConsumerAssignError, fmt.Sprintf("Subscription is Key_Shared in %s mode, the consumer asked for %s", s.ksMode, c.ksMode))
		}
		if err := s.selector.add(c); err != nil {
			return noteNone, err
		}
	}
	s.consumerSeq++
	c.order = s.consumerSeq
	s.consumers = append(s.consumers, c)
	return s.pickActive(), nil
}

// activeNote is what a change of consumers asks of a Failover
// subscription's dispatcher.
type activeNote int

const (
	noteNone     activeNote = iota
	noteSoon                // tell the consumers whose state changed (a newcomer) shortly
	noteHandover            // the active consumer changed: wait FailoverDelay, then tell
)

// pickActive chooses the active consumer of a single-active subscription
// as Apache Pulsar 4.0 does: consumers ordered by priority level, then name;
// among those of the best level, a partition's is the (index mod count)-th,
// a non-partitioned topic's the one a hash ring of consumer names (100
// points each) gives the topic's name. When it changes, the old one's
// unacked entries go back for the new one, in order, and on Failover the
// new one waits FailoverDelay before it takes over (Apache Pulsar's
// activeConsumerFailoverDelayTimeMillis): acks still on their way from the
// old one arrive first and are not sent again. s.mu held.
func (s *subscription) pickActive() activeNote {
	if s.typ != pb.CommandSubscribe_Exclusive && s.typ != pb.CommandSubscribe_Failover {
		s.active = nil
		return noteNone
	}
	var next *consumer
	if len(s.consumers) > 0 {
		sorted := slices.Clone(s.consumers)
		// s.consumers is in arrival order, so better's last tie-break
		// (arrival) is the order a stable sort on priority and name kept.
		slices.SortFunc(sorted, better)
		n := len(sorted)
		for i, c := range sorted {
			if c.priority != sorted[0].priority {
				n = i
				break
			}
		}
		if s.t.partition >= 0 {
			next = sorted[int(s.t.partition)%n]
		} else {
			next = sorted[failoverRingPick(s.t.name, sorted[:n])]
		}
	}
	if next == s.active {
		if s.typ == pb.CommandSubscribe_Failover && len(s.consumers) > 0 {
			return noteSoon // a newcomer learns who is active
		}
		return noteNone
	}
	if old := s.active; old != nil {
		for id, pe := range s.pending {
			if pe.c == old {
				s.release(id, pe)
				s.addReplay(id, pe.hash)
			}
		}
		// A round planned before must not send the next consumer
		// anything past what just went back to the replay queue.
		s.epoch++
	}
	s.active = next
	if s.typ != pb.CommandSubscribe_Failover {
		return noteNone
	}
	if s.t.c.opts.FailoverDelay > 0 {
		s.handover = true
		return noteHandover
	}
	return noteSoon
}

// activeNotifyDelay is how long after a change of consumers a Failover
// consumer whose state changed without a hand-over (a newcomer on standby,
// or any change when FailoverDelay is off) is told. Clients that register
// a consumer only once SUBSCRIBE is answered (the Go client) would miss a
// notification sent at once.
const activeNotifyDelay = 100 * time.Millisecond

// notifyActive passes what a change of consumers asks for to the
// dispatcher: ACTIVE_CONSUMER_CHANGE shortly, or a hand-over.
func (s *subscription) notifyActive(note activeNote) {
	req := s.notifyReq
	switch note {
	case noteNone:
		return
	case noteHandover:
		req = s.handoverReq
	}
	select {
	case req <- struct{}{}:
	default:
	}
}

// Whether a consumer was told it is active (ACTIVE_CONSUMER_CHANGE).
const (
	toldNothing int8 = iota
	toldActive
	toldStandby
)

// sendActive sends ACTIVE_CONSUMER_CHANGE to the consumers whose state
// differs from what they were last told, as Apache Pulsar tells only
// those. While a hand-over is pending only newcomers on standby are told;
// the rest learn when it ends.
func (s *subscription) sendActive() {
	type note struct {
		c      *consumer
		active bool
	}
	var notes []note
	s.mu.Lock()
	if s.typ == pb.CommandSubscribe_Failover {
		for _, c := range s.consumers {
			want := toldStandby
			if c == s.active {
				want = toldActive
			}
			if c.removed.Load() || c.told == want {
				continue
			}
			if s.handover && (want == toldActive || c.told != toldNothing) {
				continue
			}
			c.told = want
			notes = append(notes, note{c, want == toldActive})
		}
	}
	s.mu.Unlock()
	for _, n := range notes {
		n.c.conn.send(&pb.CommandActiveConsumerChange{ConsumerId: proto.Uint64(n.c.id), IsActive: proto.Bool(n.active)})
	}
}

// removeConsumer takes a consumer out: its unacked entries go back to be
// delivered again (without counting a redelivery, as Apache Pulsar).
func (s *subscription) removeConsumer(c *consumer) {
	s.mu.Lock()
	if c.removed.Swap(true) {
		s.mu.Unlock()
		return
	}
	s.consumers = slices.DeleteFunc(s.consumers, func(x *consumer) bool { return x == c })
	for id, pe := range s.pending {
		if pe.c == c {
			s.release(id, pe)
			if !s.txnHeld(id) {
				s.addReplay(id, pe.hash)
			}
		}
	}
	if s.selector != nil {
		s.selector.remove(c)
	}
	notify := s.pickActive()
	drop := !s.durable && len(s.consumers) == 0 && !s.keepEmpty
	s.mu.Unlock()
	s.notifyActive(notify)
	s.wakeup()
	if drop && s.t.dropIf(s, emptied) {
		return
	}
	s.save()
}

// addReplay queues an entry to be sent again; s.mu held. Key_Shared
// remembers its hash, so newer entries of that hash wait behind it.
func (s *subscription) addReplay(id uint64, hash int32) {
	if s.queue(id) && hash >= 0 {
		s.replayHash[id] = hash
		s.hashReplays[hash]++
	}
}

// unqueued drops the Key_Shared hash of an id leaving the replay queue
// (a cursor hook); s.mu held.
func (s *subscription) unqueued(id uint64) {
	if h, ok := s.replayHash[id]; ok {
		delete(s.replayHash, id)
		if s.hashReplays[h]--; s.hashReplays[h] <= 0 {
			delete(s.hashReplays, h)
		}
	}
}

// released gives a pending entry's messages back to its consumer's
// unacked count and its hash's owner (a cursor hook); s.mu held.
func (s *subscription) released(_ uint64, pe pendingEntry) {
	pe.c.unacked.Add(-int64(pe.msgs))
	if pe.hash >= 0 && s.owners != nil {
		if o := s.owners[pe.hash]; o != nil {
			o.n--
			if o.n <= 0 {
				delete(s.owners, pe.hash)
			}
		}
	}
}

// closeAll disconnects every consumer with a CLOSE_CONSUMER, as Apache
// Pulsar does when a topic is unloaded or deleted or a cursor is reset.
func (s *subscription) closeAll() {
	for _, c := range s.detachAll() {
		c.tellClosed()
	}
}

// detachAll takes every consumer off the subscription and its
// connection, without telling the clients yet, and returns them.
func (s *subscription) detachAll() []*consumer {
	s.mu.Lock()
	cs := slices.Clone(s.consumers)
	s.mu.Unlock()
	for _, c := range cs {
		c.detach()
	}
	return cs
}

func (t *topic) removeSubscription(s *subscription) {
	t.mu.Lock()
	if t.subs[s.name] == s {
		delete(t.subs, s.name)
		t.publishSubs()
	}
	t.mu.Unlock()
	s.mu.Lock()
	s.deleted = true
	s.mu.Unlock()
	s.stop()
}

// deleteSubscription removes a subscription and its cursor. Without force
// it refuses one with consumers.
func (t *topic) deleteSubscription(name string, force bool) error {
	t.mu.Lock()
	s := t.subs[name]
	t.mu.Unlock()
	if s == nil {
		return errSubscriptionNotFound
	}
	if !force && s.consumerCount() > 0 {
		return errSubscriptionBusy
	}
	s.closeAll()
	t.removeSubscription(s)
	if s.durable {
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		if err := t.log.DeleteCursor(name); err != nil && !errors.Is(err, store.ErrDeleted) {
			return fmt.Errorf("delete cursor %s: %w", name, err)
		}
	}
	return nil
}

var (
	errExclusiveBusy        = pulsarwire.NewServerError(pb.ServerError_ConsumerBusy, "Exclusive consumer is already connected")
	errSubscriptionNotFound = pulsarwire.NewServerError(pb.ServerError_SubscriptionNotFound, "Subscription not found")
	errSubscriptionBusy     = pulsarwire.NewServerError(pb.ServerError_ConsumerBusy, "Subscription has active connected consumers")
)

// ---------------------------------------------------------------- cursor

// ackEntry acknowledges a whole entry; s.mu held.
func (s *subscription) ackEntry(id uint64) {
	if s.ack(id) {
		delete(s.delayed, id)
	}
}

// ackBatchPart records a partial acknowledgement of a batch; ackSet has a
// bit set for each message still unacknowledged. s.mu held.
func (s *subscription) ackBatchPart(id uint64, ackSet []int64) {
	if s.ackPart(id, ackSet) {
		delete(s.delayed, id)
	}
}

// ackCumulative acknowledges every entry up to and including id (or up
// to id, with a partial ack of id itself). s.mu held.
func (s *subscription) ackCumulative(id uint64, ackSet []int64) {
	if s.ackUpTo(id, ackSet) {
		delete(s.delayed, id)
	}
}

// reset moves the cursor to entry pos (a seek): everything before it is
// acknowledged, nothing after it is; in-flight state is forgotten.
func (s *subscription) reset(pos uint64) {
	s.moveTo(pos)
	clear(s.replayHash)
	clear(s.hashReplays)
	clear(s.delayed)
	if s.owners != nil {
		clear(s.owners)
	}
	s.epoch++
}

// save writes the cursor when it changed (durable subscriptions only).
func (s *subscription) save() {
	if !s.durable {
		return
	}
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if !s.dirty || s.deleted {
		s.mu.Unlock()
		return
	}
	state := s.encode(uint64(s.typ))
	s.dirty = false
	s.mu.Unlock()
	if err := s.t.log.SaveCursor(s.name, state); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		if !errors.Is(err, store.ErrClosed) && !errors.Is(err, store.ErrDeleted) {
			s.t.c.log.Error("saving cursor failed", "topic", s.t.name, "subscription", s.name, "err", err)
		}
	}
}

// decodeCursor makes the durable subscription saved as b.
func decodeCursor(t *topic, name string, b []byte) (*subscription, error) {
	c := newCursor(0, nil)
	typ, err := c.decode(b)
	if err != nil {
		return nil, err
	}
	s := newSubscription(t, name, true, pb.CommandSubscribe_SubType(typ), c.markDelete)
	s.acked, s.batchAcks = c.acked, c.batchAcks
	// Entries trimmed away meanwhile cannot be read: start at the first.
	s.startAt(t.log.First())
	return s, nil
}

// failoverRingPick is Apache Pulsar's choice of the active consumer for a
// non-partitioned topic: a ring of Murmur3 hashes of name+i (i < 100) for
// each consumer, a later consumer winning a collision, and the first point
// at or after the hash of the topic's name.
func failoverRingPick(topic string, cs []*consumer) int {
	const replicas = 100
	type point struct {
		hash  int32
		index int
	}
	ring := make([]point, 0, len(cs)*replicas)
	for i, c := range cs {
		for j := 0; j < replicas; j++ {
			h := int32(murmur3([]byte(c.name+strconv.Itoa(j)), 0) & 0x7fffffff)
			ring = append(ring, point{h, i})
		}
	}
	// Stable: for equal hashes the last added (largest index) wins.
	slices.SortStableFunc(ring, func(a, b point) int { return cmp.Compare(a.hash, b.hash) })
	th := int32(murmur3([]byte(topic), 0) & 0x7fffffff)
	k := sort.Search(len(ring), func(k int) bool { return ring[k].hash >= th })
	if k == len(ring) {
		k = 0
	}
	for k+1 < len(ring) && ring[k+1].hash == ring[k].hash {
		k++
	}
	return ring[k].index
}
