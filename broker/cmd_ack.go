package broker

import (
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// handleAck acknowledges messages, individually or cumulatively (refused
// for Shared and Key_Shared, as Apache Pulsar does), whole entries or, with
// an ack_set, single messages of a batch. With a request id it answers
// ACK_RESPONSE.
func (cn *conn) handleAck(m *pb.CommandAck) {
	c := cn.consumer(m.GetConsumerId())
	if c == nil {
		cn.log.Debug("ACK for an unknown consumer", "consumer_id", m.GetConsumerId())
		cn.ackReply(m, pb.ServerError_ConsumerNotFound.Enum(), "Consumer not found")
		return
	}
	s := c.sub
	if inTxn(m.TxnidMostBits, m.TxnidLeastBits) {
		if cn.c.txns == nil {
			cn.ackReply(m, pb.ServerError_NotAllowedError.Enum(), txnOffAckMessage)
			return
		}
		cn.ackInTxn(s, m)
		return
	}
	s.mu.Lock()
	if m.GetAckType() == pb.CommandAck_Cumulative {
		if !dispatcherOf(s.typ).ordered() {
			s.mu.Unlock()
			cn.log.Info("cumulative ack refused on a shared subscription", "subscription", s.name, "type", s.typ.String())
			cn.ackReply(m, pb.ServerError_NotAllowedError.Enum(), "Cumulative ack is not allowed for Shared/Key_Shared subscription")
			return
		}
		if ids := m.GetMessageId(); len(ids) > 0 && ids[0].GetLedgerId() == s.t.ledger {
			s.ackCumulative(ids[0].GetEntryId(), ids[0].GetAckSet())
		}
	} else {
		for _, id := range m.GetMessageId() {
			if id.GetLedgerId() != s.t.ledger {
				continue
			}
			if len(id.GetAckSet()) > 0 {
				s.ackBatchPart(id.GetEntryId(), id.GetAckSet())
			} else {
				s.ackEntry(id.GetEntryId())
			}
		}
	}
	// With no consumer holding a permit nothing can be sent, whatever the
	// ack freed: the next FLOW wakes the dispatcher (handleFlow). Waking it
	// on every ACK of a drained window was one thread wake-up an entry.
	wake := s.anyPermits()
	s.mu.Unlock()
	cn.ackReply(m, nil, "")
	if wake {
		s.wakeup()
	}
}

// anyPermits reports whether a consumer of s may be sent something; s.mu
// held.
func (s *subscription) anyPermits() bool {
	for _, c := range s.consumers {
		if c.permits > 0 {
			return true
		}
	}
	return false
}

// ackInTxn holds an ACK's entries for its transaction
// (subscription_txn.go) and answers when the client asked.
func (cn *conn) ackInTxn(s *subscription, m *pb.CommandAck) {
	id := pulsarwire.TxnID{Most: m.GetTxnidMostBits(), Least: m.GetTxnidLeastBits()}
	s.mu.Lock()
	if m.GetAckType() == pb.CommandAck_Cumulative && !dispatcherOf(s.typ).ordered() {
		s.mu.Unlock()
		cn.ackReply(m, pb.ServerError_NotAllowedError.Enum(), "Cumulative ack is not allowed for Shared/Key_Shared subscription")
		return
	}
	code, msg, ok := s.ackInTxn(m, id)
	s.mu.Unlock()
	if !ok {
		cn.log.Debug("transactional ACK refused", "subscription", s.name, "txn", id, "code", code.String(), "reason", msg)
		cn.ackReply(m, code.Enum(), msg)
		return
	}
	cn.ackReply(m, nil, "")
}
