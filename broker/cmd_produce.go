package broker

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/broker/store"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

type producer struct {
	id     uint64
	name   string
	topic  *topic
	conn   *conn
	access pb.ProducerAccessMode
	since  time.Time

	// ready is false while a WaitForExclusive producer waits its turn
	// (topic_access.go); rid, version and wantEpoch answer it then.
	ready     atomic.Bool
	rid       uint64
	version   []byte
	wantEpoch int64

	msgs, bytes atomic.Int64
	rate        meter // of msgs and bytes, for the admin API
	closed      atomic.Bool

	// broken holds the refusal of a failed append (a full disk): every
	// later SEND of this producer gets it too, unstored, so that what the
	// client resends on its new connection lands in order and once. Only
	// the connection's read loop touches it.
	broken *pb.CommandSendError
}

func (cn *conn) handleProducer(m *pb.CommandProducer) {
	rid := m.GetRequestId()
	fail := func(code pb.ServerError, msg string) {
		cn.log.Info("producer refused", "topic", m.GetTopic(), "producer_id", m.GetProducerId(), "error", code.String(), "reason", msg)
		cn.sendError(rid, code, msg)
	}
	t, code, reason, ok := cn.clientTopic(m.GetTopic())
	if !ok {
		fail(code, reason)
		return
	}
	if code, reason, ok := cn.authorize(t, actionProduce); !ok {
		fail(code, reason)
		return
	}
	name := t.String()
	if p := cn.producer(m.GetProducerId()); p != nil {
		if p.topic.name == name {
			cn.send(&pb.CommandProducerSuccess{RequestId: proto.Uint64(rid), ProducerName: proto.String(p.name), LastSequenceId: proto.Int64(-1), SchemaVersion: []byte{}, ProducerReady: proto.Bool(p.ready.Load())})
			return
		}
		fail(pb.ServerError_ServiceNotReady, "Producer is already present on the connection")
		return
	}
	tp, err := cn.c.topicFor(t, true)
	if err != nil {
		fail(errorCode(err), errorText(err))
		return
	}
	p := &producer{
		id:     m.GetProducerId(),
		topic:  tp,
		conn:   cn,
		access: m.GetProducerAccessMode(),
		since:  time.Now(),
		rid:    rid,
	}
	userName := m.GetProducerName() != "" && m.GetUserProvidedProducerName()
	if m.GetProducerName() != "" {
		p.name = m.GetProducerName()
	} else {
		p.name = cn.c.opts.ClusterName + "-" + strconv.Itoa(cn.srv.index) + "-" + strconv.FormatUint(cn.c.producers.Add(1), 10)
	}
	// The Java client reads schema_version unconditionally; Apache Pulsar
	// sends an empty one for a producer without a schema.
	version := []byte{}
	if m.Schema != nil {
		version, err = tp.registerSchema(m.Schema)
		if err != nil {
			fail(pb.ServerError_IncompatibleSchema, err.Error())
			return
		}
	}
	p.version = version
	want := int64(-1)
	if m.TopicEpoch != nil {
		want = int64(min(m.GetTopicEpoch(), uint64(1)<<62))
	}
	adm, err := tp.addProducer(p, userName, want)
	for _, o := range adm.fenced {
		o.fenceOut()
		cn.log.Info("producer fenced", "topic", name, "producer", o.name, "by", p.name)
	}
	for _, o := range adm.failed {
		o.failWaiting()
	}
	if err != nil {
		fail(errorCode(err), errorText(err))
		return
	}
	if name := m.GetInitialSubscriptionName(); name != "" {
		tp.ensureSubscription(name)
	}
	p.ready.Store(!adm.queued)
	cn.mu.Lock()
	cn.producers[p.id] = p
	delete(cn.closedProducers, p.id)
	cn.mu.Unlock()
	if adm.queued {
		// Apache Pulsar answers at once that the producer exists but is
		// not ready, and again with the same request id once it is.
		cn.log.Debug("producer waiting for exclusive access", "topic", name, "producer", p.name, "producer_id", p.id)
		cn.send(producerSuccess(rid, p.name, version, -1, false))
		return
	}
	cn.log.Debug("producer created", "topic", name, "producer", p.name, "producer_id", p.id)
	cn.send(producerSuccess(rid, p.name, version, adm.epoch, true))
}

func producerSuccess(rid uint64, name string, version []byte, epoch int64, ready bool) *pb.CommandProducerSuccess {
	m := &pb.CommandProducerSuccess{
		RequestId:      proto.Uint64(rid),
		ProducerName:   proto.String(name),
		LastSequenceId: proto.Int64(-1),
		SchemaVersion:  version,
		ProducerReady:  proto.Bool(ready),
	}
	if epoch >= 0 {
		m.TopicEpoch = proto.Uint64(uint64(epoch))
	}
	return m
}

// addProducer registers a producer, enforcing unique names and the access
// modes (topic_access.go). want is the topic epoch the producer names, -1
// for none.
func (t *topic) addProducer(p *producer, userName bool, want int64) (admitted, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unloaded {
		return admitted{}, pulsarwire.NewServerError(pb.ServerError_ServiceNotReady, "topic is being unloaded")
	}
	// ExclusiveWithFencing takes every producer off the topic: none
	// keeps the name then.
	if userName && p.access != pb.ProducerAccessMode_ExclusiveWithFencing {
		for o := range t.producers {
			if o.name == p.name {
				return admitted{}, pulsarwire.NewServerError(pb.ServerError_ProducerBusy, fmt.Sprintf("Producer with name '%s' is already connected to topic '%s'", p.name, t.name))
			}
		}
	}
	adm, err := t.admit(p, want)
	if err != nil || adm.queued {
		return adm, err
	}
	t.producers[p] = struct{}{}
	return adm, nil
}

func (t *topic) removeProducer(p *producer) {
	t.mu.Lock()
	delete(t.producers, p)
	next, epoch, err := t.leave(p)
	t.mu.Unlock()
	promoted(next, epoch, err)
}

// detach takes the producer off its topic and connection without telling
// the client; false when it was closed already. Messages the client sent
// before it learns are ignored (Apache Pulsar's recently closed
// producers), not taken for a protocol error.
func (p *producer) detach() bool {
	if p.closed.Swap(true) {
		return false
	}
	p.topic.removeProducer(p)
	cn := p.conn
	cn.mu.Lock()
	if cn.producers[p.id] == p {
		delete(cn.producers, p.id)
		cn.closedProducers[p.id] = true
	}
	cn.mu.Unlock()
	return true
}

// tellClosed sends the client a CLOSE_PRODUCER for a detached producer.
func (p *producer) tellClosed() {
	p.conn.send(&pb.CommandCloseProducer{ProducerId: proto.Uint64(p.id), RequestId: proto.Uint64(noRequest)})
}

// handleSend appends the message and answers with its receipt. The append
// returns only once the entry is written to the OS, so a receipted message
// survives kill -9. At fsync durability the receipt waits in the
// connection's receipt queue for the fsync (conn_receipts.go) while the read
// loop goes on.
func (cn *conn) handleSend(f pulsarwire.Frame) bool {
	s := f.Cmd.GetSend()
	p := cn.producer(s.GetProducerId())
	if p == nil && cn.recentlyClosed(s.GetProducerId()) {
		cn.log.Debug("message for a producer the broker closed; ignored", "producer_id", s.GetProducerId())
		return true
	}
	if p == nil || !p.ready.Load() {
		// Apache Pulsar closes the connection too: the client's producer
		// state no longer matches ours (or, waiting for exclusive access,
		// the producer may not send yet; or ExclusiveWithFencing fenced it).
		cn.log.Warn("closing connection: message for an unknown producer", "producer_id", s.GetProducerId())
		cn.finish()
		return false
	}
	if !f.HasPayload() {
		cn.sendFailed(s, pb.ServerError_UnknownError, "SEND without a message")
		return true
	}
	txn := inTxn(s.TxnidMostBits, s.TxnidLeastBits)
	if txn && cn.c.txns == nil {
		cn.sendFailed(s, pb.ServerError_NotAllowedError, txnOffSendMessage)
		return true
	}
	if p.broken != nil {
		// A later message may fit where an earlier one did not: storing it
		// would put it before the one the client is about to resend.
		cn.sendFailed(s, p.broken.GetError(), p.broken.GetMessage())
		return true
	}
	var id uint64
	var err error
	if txn {
		var refused *errTxn
		if id, refused, err = cn.sendInTxn(p, f, s); refused != nil {
			cn.log.Debug("transactional SEND refused", "topic", p.topic.name, "code", refused.code.String(), "reason", refused.msg)
			cn.sendFailed(s, refused.code, refused.msg)
			return true
		}
	} else {
		id, err = p.topic.publish(f.Entry, int64(f.Metadata.GetPublishTime()), s.GetNumMessages())
	}
	if err != nil {
		code, msg := appendFailure(p.topic, err)
		cn.log.Error("append failed; refusing this producer's messages until it reconnects", "topic", p.topic.name, "producer", p.name, "err", err)
		p.broken = &pb.CommandSendError{Error: code.Enum(), Message: proto.String(msg)}
		cn.sendFailed(s, code, msg)
		return true
	}
	p.msgs.Add(int64(s.GetNumMessages()))
	p.bytes.Add(int64(len(f.Entry)))
	if p.topic.log.Syncs() {
		return cn.queueAnswer(pendingAnswer{t: p.topic, id: id, producer: s.GetProducerId(), seq: s.GetSequenceId(),
			highest: s.GetHighestSequenceId(), hasHighest: s.HighestSequenceId != nil})
	}
	if b := cn.out(); b != nil {
		*b = appendReceipt(*b, s.GetProducerId(), s.GetSequenceId(), s.GetHighestSequenceId(), p.topic.ledger, id, s.HighestSequenceId != nil)
		cn.doneInline()
	}
	return true
}

// appendFailure is what the client is told when storing its message
// failed.
func appendFailure(t *topic, err error) (pb.ServerError, string) {
	if errors.Is(err, store.ErrNoSpace) {
		// The client gets no server path, and a reason it can act on.
		return errorCode(err), "Disk full: the broker has no space left to store messages of " + t.name + "; retry once space is freed"
	}
	return errorCode(err), err.Error()
}

func (cn *conn) handleCloseProducer(m *pb.CommandCloseProducer) {
	cn.mu.Lock()
	p := cn.producers[m.GetProducerId()]
	delete(cn.producers, m.GetProducerId())
	cn.mu.Unlock()
	if p != nil {
		p.closed.Store(true)
		p.topic.removeProducer(p)
	}
	// After the receipts still waiting for their fsync, as Apache Pulsar
	// closes a producer once its pending messages are stored.
	cn.sendAfterReceipts(&pb.CommandSuccess{RequestId: proto.Uint64(m.GetRequestId())})
}
