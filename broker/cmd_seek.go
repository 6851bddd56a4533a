package broker

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// handleSeek resets the consumer's subscription to a message id or a
// publish time. As Apache Pulsar does, every consumer of the subscription
// is then disconnected with CLOSE_CONSUMER before the SUCCESS, and the
// clients subscribe again from the new position.
func (cn *conn) handleSeek(m *pb.CommandSeek) {
	rid := m.GetRequestId()
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.sendError(rid, pb.ServerError_ConsumerNotFound, "Consumer not found")
		return
	}
	s := c.sub
	var pos uint64
	switch {
	case m.MessageId != nil:
		pos = s.t.position(m.MessageId)
		if s.readCompacted.Load() && pos == s.t.log.First() {
			pos = s.t.compactedStart(pos) // the view's start, under a trimmed log
		}
	case m.MessagePublishTime != nil:
		p, err := s.t.log.SeekTime(int64(m.GetMessagePublishTime()))
		if err != nil {
			cn.sendError(rid, errorCode(err), "seek by time: "+err.Error())
			return
		}
		pos = p
	default:
		cn.sendError(rid, pb.ServerError_MetadataError, "Message id and message publish time were not present")
		return
	}
	// The consumers are taken off first, the cursor reset after: a
	// dispatch between the two would give a consumer about to be closed
	// entries from the new position, which its close would then queue
	// for replay ahead of the rest, out of order.
	if !s.durable {
		s.mu.Lock()
		s.keepEmpty = true // the reader comes back to the sought position
		s.keptAt = time.Now()
		s.mu.Unlock()
	}
	closed := s.detachAll()
	s.mu.Lock()
	s.reset(pos)
	s.mu.Unlock()
	cn.log.Debug("subscription reset", "topic", s.t.name, "subscription", s.name, "entry", pos)
	for _, c := range closed {
		c.tellClosed()
	}
	s.save()
	cn.send(&pb.CommandSuccess{RequestId: proto.Uint64(rid)})
}

// handleGetLastMessageID answers the topic's last message id (with the
// largest batch index of its entry, as Apache Pulsar) and the consumer's
// mark-delete position.
func (cn *conn) handleGetLastMessageID(m *pb.CommandGetLastMessageId) {
	rid := m.GetRequestId()
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.sendError(rid, pb.ServerError_ConsumerNotFound, "Consumer not found")
		return
	}
	t := c.sub.t
	next := t.log.Next()
	last := &pb.MessageIdData{
		LedgerId:   proto.Uint64(t.ledger),
		EntryId:    proto.Uint64(noRequest), // -1: no entry yet
		Partition:  proto.Int32(t.partition),
		BatchIndex: proto.Int32(-1),
	}
	if e, ok := t.lastCompacted(); ok && c.sub.readCompacted.Load() {
		// Nothing after the horizon: the view's last message (Apache
		// Pulsar answers from its compacted ledger).
		last.EntryId = proto.Uint64(e.ID)
		if info, err := scanEntry(e.Data); err == nil && info.batched {
			last.BatchIndex = proto.Int32(info.numMessages - 1)
		}
	} else if cn.c.txns != nil {
		// Nothing past an open transaction's first entry, no marker, no
		// aborted entry: the last a consumer could be given (Apache
		// Pulsar's last dispatchable position; -1:-1 when there is none).
		if id, info, ok := t.lastDispatchable(); ok {
			last.EntryId = proto.Uint64(id)
			if info.batched {
				last.BatchIndex = proto.Int32(info.numMessages - 1)
			}
		} else {
			last.LedgerId = proto.Uint64(noRequest)
		}
	} else if next > 0 {
		last.EntryId = proto.Uint64(next - 1)
		es, err := t.log.Read(next-1, 1, maxReadBytes)
		if err == nil && len(es) == 1 {
			if info, err := scanEntry(es[0].Data); err == nil && info.batched {
				last.BatchIndex = proto.Int32(info.numMessages - 1)
			}
		}
	}
	s := c.sub
	s.mu.Lock()
	md := s.markDelete
	s.mu.Unlock()
	mdID := &pb.MessageIdData{LedgerId: proto.Uint64(t.ledger), EntryId: proto.Uint64(md - 1)}
	cn.send(&pb.CommandGetLastMessageIdResponse{
		RequestId:                  proto.Uint64(rid),
		LastMessageId:              last,
		ConsumerMarkDeletePosition: mdID,
	})
}

// handleConsumerStats answers CONSUMER_STATS from what the broker tracks.
func (cn *conn) handleConsumerStats(m *pb.CommandConsumerStats) {
	rid := m.GetRequestId()
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.consumerStatsFailed(rid, pb.ServerError_ConsumerNotFound, "Consumer not found")
		return
	}
	s := c.sub
	s.mu.Lock()
	permits := max(c.permits, 0)
	typ := s.typ
	s.mu.Unlock()
	cn.send(&pb.CommandConsumerStatsResponse{
		RequestId:        proto.Uint64(rid),
		ConsumerName:     proto.String(c.name),
		AvailablePermits: proto.Uint64(uint64(permits)),
		UnackedMessages:  proto.Uint64(uint64(max(c.unacked.Load(), 0))),
		Address:          proto.String(cn.peer),
		ConnectedSince:   proto.String(c.since.UTC().Format("2006-01-02T15:04:05.999Z07:00")),
		Type:             proto.String(typ.String()),
		MsgBacklog:       proto.Uint64(uint64(s.backlog())),
		MsgRateOut:       proto.Float64(0),
		MsgThroughputOut: proto.Float64(0),
		MsgRateRedeliver: proto.Float64(0),
	})
}
