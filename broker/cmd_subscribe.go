package broker

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// consumer is one client consumer attached to a subscription.
type consumer struct {
	id       uint64
	conn     *conn
	sub      *subscription
	name     string
	typ      pb.CommandSubscribe_SubType
	priority int32
	ksMode   pb.KeySharedMode
	ranges   []hashRange // Key_Shared STICKY
	since    time.Time
	order    uint64 // arrival order within the subscription

	// guarded by sub.mu
	permits  int64
	epoch    uint64
	hasEpoch bool
	told     int8 // Failover: what ACTIVE_CONSUMER_CHANGE last said (toldActive, ...)

	unacked  atomic.Int64 // messages dispatched and not acknowledged
	msgsOut  atomic.Int64
	bytesOut atomic.Int64
	rate     meter // of msgsOut and bytesOut, for the admin API
	removed  atomic.Bool
}

func (cn *conn) handleSubscribe(m *pb.CommandSubscribe) {
	rid := m.GetRequestId()
	fail := func(code pb.ServerError, msg string) {
		cn.log.Info("subscribe refused", "topic", m.GetTopic(), "subscription", m.GetSubscription(), "consumer_id", m.GetConsumerId(), "error", code.String(), "reason", msg)
		cn.sendError(rid, code, msg)
	}
	t, code, reason, ok := cn.clientTopic(m.GetTopic())
	if !ok {
		fail(code, reason)
		return
	}
	if code, reason, ok := cn.authorize(t, actionConsume); !ok {
		fail(code, reason)
		return
	}
	if m.GetSubscription() == "" {
		fail(pb.ServerError_NotAllowedError, "Empty subscription name")
		return
	}
	name := t.String()
	if c := cn.consumer(m.GetConsumerId()); c != nil {
		if c.sub.t.name == name && c.sub.name == m.GetSubscription() {
			cn.send(&pb.CommandSuccess{RequestId: proto.Uint64(rid)})
			return
		}
		fail(pb.ServerError_ServiceNotReady, "Consumer is already present on the connection")
		return
	}
	tp, err := cn.c.topicFor(t, m.GetForceTopicCreation())
	if err != nil {
		fail(errorCode(err), errorText(err))
		return
	}
	c := &consumer{
		id:       m.GetConsumerId(),
		conn:     cn,
		name:     m.GetConsumerName(),
		typ:      m.GetSubType(),
		priority: m.GetPriorityLevel(),
		since:    time.Now(),
	}
	if m.ConsumerEpoch != nil {
		c.epoch, c.hasEpoch = m.GetConsumerEpoch(), true
	}
	if c.typ == pb.CommandSubscribe_Key_Shared {
		if ks := m.GetKeySharedMeta(); ks != nil {
			c.ksMode = ks.GetKeySharedMode()
			for _, r := range ks.GetHashRanges() {
				c.ranges = append(c.ranges, hashRange{lo: r.GetStart(), hi: r.GetEnd()})
			}
		}
	}
	if m.Schema != nil {
		if _, err := tp.registerSchema(m.Schema); err != nil {
			fail(pb.ServerError_IncompatibleSchema, err.Error())
			return
		}
	}
	if m.GetReadCompacted() && c.typ != pb.CommandSubscribe_Exclusive && c.typ != pb.CommandSubscribe_Failover {
		// Apache Pulsar's words.
		fail(pb.ServerError_NotAllowedError, "readCompacted only allowed on failover or exclusive subscriptions")
		return
	}
	notify, err := tp.subscribe(m, c)
	if err != nil {
		fail(errorCode(err), errorText(err))
		return
	}
	cn.mu.Lock()
	cn.consumers[c.id] = c
	cn.mu.Unlock()
	cn.log.Debug("consumer subscribed", "topic", name, "subscription", c.sub.name, "type", c.typ.String(), "consumer", c.name, "consumer_id", c.id)
	cn.send(&pb.CommandSuccess{RequestId: proto.Uint64(rid)})
	c.sub.notifyActive(notify)
	c.sub.wakeup()
}

// subscribe finds or creates the subscription and adds the consumer.
func (t *topic) subscribe(m *pb.CommandSubscribe, c *consumer) (activeNote, error) {
	name := m.GetSubscription()
	t.mu.Lock()
	if t.unloaded {
		t.mu.Unlock()
		return noteNone, pulsarwire.NewServerError(pb.ServerError_ServiceNotReady, "topic is being unloaded")
	}
	s := t.subs[name]
	created := false
	if s == nil {
		var start uint64
		if !m.GetDurable() && m.StartMessageId != nil {
			start = t.position(m.StartMessageId)
		} else if m.GetInitialPosition() == pb.CommandSubscribe_Earliest {
			start = t.log.First()
		} else {
			start = t.log.Next()
		}
		if m.GetReadCompacted() && start == t.log.First() {
			start = t.compactedStart(start)
		}
		s = newSubscription(t, name, m.GetDurable(), m.GetSubType(), start)
		t.subs[name] = s
		t.publishSubs()
		created = true
	}
	t.mu.Unlock()
	c.sub = s
	s.readCompacted.Store(m.GetReadCompacted())
	notify, err := s.addConsumer(c)
	if errors.Is(err, errExclusiveBusy) && s.dropDeadExclusive(c.conn) {
		notify, err = s.addConsumer(c)
	}
	if err != nil {
		if created {
			t.dropIf(s, unused)
		}
		return noteNone, err
	}
	s.mu.Lock()
	s.keepEmpty = false
	s.mu.Unlock()
	s.start() // idempotent: whoever adds the first consumer starts it
	if created {
		if s.durable {
			s.mu.Lock()
			s.dirty = true
			s.mu.Unlock()
			s.save()
		}
	}
	return notify, nil
}

// position maps a message id from a client to an entry of this topic: the
// entry itself (Apache Pulsar starts a reader at the id's entry and lets
// the client skip what it must). Ids of an older incarnation of the topic
// mean its start; "latest" and later ledgers mean its end.
func (t *topic) position(id *pb.MessageIdData) uint64 {
	l, e := id.GetLedgerId(), id.GetEntryId()
	first, next := t.log.First(), t.log.Next()
	switch {
	case l == math.MaxUint64 || int64(e) < 0 && l != math.MaxInt64:
		return first
	case l == math.MaxInt64:
		return next
	case l < t.ledger:
		return first
	case l > t.ledger:
		return next
	}
	return min(max(e, first), next)
}

func (cn *conn) handleCloseConsumer(m *pb.CommandCloseConsumer) {
	cn.mu.Lock()
	c := cn.consumers[m.GetConsumerId()]
	delete(cn.consumers, m.GetConsumerId())
	cn.mu.Unlock()
	if c != nil {
		c.sub.removeConsumer(c)
	}
	cn.send(&pb.CommandSuccess{RequestId: proto.Uint64(m.GetRequestId())})
}

// detach takes the consumer off its connection and its subscription
// (its unacknowledged messages go back) without telling the client.
func (c *consumer) detach() {
	cn := c.conn
	cn.mu.Lock()
	if cn.consumers[c.id] == c {
		delete(cn.consumers, c.id)
	}
	cn.mu.Unlock()
	c.sub.removeConsumer(c)
}

// tellClosed sends the client a CLOSE_CONSUMER for a detached consumer.
func (c *consumer) tellClosed() {
	c.conn.send(&pb.CommandCloseConsumer{ConsumerId: proto.Uint64(c.id), RequestId: proto.Uint64(noRequest)})
}

// handleUnsubscribe deletes the subscription when the asking consumer is
// its only one (or with force), as Apache Pulsar does.
func (cn *conn) handleUnsubscribe(m *pb.CommandUnsubscribe) {
	rid := m.GetRequestId()
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.sendError(rid, pb.ServerError_ConsumerNotFound, "Consumer not found")
		return
	}
	s := c.sub
	s.mu.Lock()
	others := 0
	for _, x := range s.consumers {
		if x != c {
			others++
		}
	}
	s.mu.Unlock()
	if others > 0 && !m.GetForce() {
		cn.sendError(rid, pb.ServerError_ConsumerBusy, "Unconnected or shared consumer attempting to unsubscribe")
		return
	}
	cn.mu.Lock()
	delete(cn.consumers, c.id)
	cn.mu.Unlock()
	s.removeConsumer(c)
	if err := s.t.deleteSubscription(s.name, true); err != nil && err != errSubscriptionNotFound {
		cn.sendError(rid, errorCode(err), errorText(err))
		return
	}
	cn.send(&pb.CommandSuccess{RequestId: proto.Uint64(rid)})
}

// ensureSubscription creates a durable subscription at the end of the
// topic unless it exists (a producer's initial_subscription_name).
func (t *topic) ensureSubscription(name string) {
	t.mu.Lock()
	if _, ok := t.subs[name]; ok || t.unloaded {
		t.mu.Unlock()
		return
	}
	s := newSubscription(t, name, true, pb.CommandSubscribe_Exclusive, t.log.Next())
	s.dirty = true
	t.subs[name] = s
	t.publishSubs()
	t.mu.Unlock()
	s.start()
	s.save()
}

// livenessTimeout is how long a connection holding an Exclusive
// subscription has to answer a PING before a newcomer replaces it: 5 s
// (Apache Pulsar's connectionLivenessCheckTimeoutMillis), or the
// keep-alive interval when that is shorter.
const livenessTimeout = 5 * time.Second

// dropDeadExclusive checks the connection of the consumer holding an
// Exclusive subscription; when it does not answer, it is closed and the
// consumer removed, and true is returned.
func (s *subscription) dropDeadExclusive(asker *conn) bool {
	s.mu.Lock()
	var holder *consumer
	if len(s.consumers) == 1 {
		holder = s.consumers[0]
	}
	s.mu.Unlock()
	if holder == nil || holder.conn == asker || holder.conn.alive(min(livenessTimeout, s.t.c.opts.KeepAlive)) {
		return false
	}
	holder.conn.log.Warn("closing connection: it holds an Exclusive subscription and does not answer a PING", "topic", s.t.name, "subscription", s.name)
	holder.conn.abort("liveness check failed")
	holder.detach()
	return true
}
