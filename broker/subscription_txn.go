package broker

import (
	"fmt"
	"maps"
	"slices"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Acknowledgements inside a transaction (Apache Pulsar's pending acks). An
// entry a transaction acknowledged is held: not redelivered, not
// dispatched again after a restart, and refused to any other
// acknowledgement in a transaction (TransactionConflict) until the
// transaction ends. Its commit acknowledges the entries for good (the
// cursor is saved before the coordinator forgets the transaction); its
// abort sends them again, as a redelivery (on Shared and Key_Shared with
// the count raised; on Exclusive and Failover every unacknowledged entry
// again, in order, as Apache Pulsar rewinds there). What a transaction
// holds is also in the coordinator's record, which gives it back after a
// restart.

// txnCumAck is a cumulative acknowledgement held by a transaction
// (Exclusive and Failover): everything up to and including pos.
type txnCumAck struct {
	txn pulsarwire.TxnID
	pos uint64
}

// txnHeld reports whether a transaction holds entry id acknowledged;
// s.mu held.
func (s *subscription) txnHeld(id uint64) bool {
	if _, ok := s.txnAcks[id]; ok {
		return true
	}
	return s.txnCum != nil && id <= s.txnCum.pos
}

// conflict is Apache Pulsar's TransactionConflict message.
func (s *subscription) conflict(id pulsarwire.TxnID, what string) string {
	return fmt.Sprintf("org.apache.pulsar.transaction.common.exception.TransactionConflictException: [%s][%s] Transaction:%s %s",
		s.t.name, s.name, id, what)
}

// ackInTxn holds the entries of an ACK for transaction id, all or none;
// it returns the refusal's code and message when there is one. s.mu held
// (the coordinator records the acknowledgement under it, so that the
// transaction's end here comes after).
func (s *subscription) ackInTxn(m *pb.CommandAck, id pulsarwire.TxnID) (pb.ServerError, string, bool) {
	var ids []uint64
	for _, mid := range m.GetMessageId() {
		if mid.GetLedgerId() == s.t.ledger {
			ids = append(ids, mid.GetEntryId())
		}
	}
	if m.GetAckType() == pb.CommandAck_Cumulative {
		if len(ids) == 0 {
			return 0, "", true
		}
		pos := ids[0]
		if c := s.txnCum; c != nil && c.txn != id {
			return pb.ServerError_TransactionConflict, s.conflict(id, fmt.Sprintf(
				"try to cumulative batch ack position: %d:%d within range of current currentPosition: %d:%d", s.t.ledger, pos, s.t.ledger, c.pos)), false
		}
		if err := s.t.c.txns.acked(id, s.t.name, s.name, []uint64{pos}, true); err != nil {
			return txnRefusal(err)
		}
		if s.txnCum == nil || pos > s.txnCum.pos {
			s.txnCum = &txnCumAck{txn: id, pos: pos}
		}
		return 0, "", true
	}
	for _, e := range ids {
		switch {
		case s.isAcked(e):
			s.offConsumers(m)
			return pb.ServerError_TransactionConflict, s.conflict(id, fmt.Sprintf("try to ack message:%d:%d (ackSet is null) already acked before.", s.t.ledger, e)), false
		case s.txnHeld(e):
			s.offConsumers(m)
			return pb.ServerError_TransactionConflict, s.conflict(id, fmt.Sprintf("try to ack message:%d:%d (ackSet is null) in pending ack status.", s.t.ledger, e)), false
		}
	}
	if len(ids) == 0 {
		return 0, "", true
	}
	if err := s.t.c.txns.acked(id, s.t.name, s.name, ids, false); err != nil {
		return txnRefusal(err)
	}
	if s.txnAcks == nil {
		s.txnAcks = map[uint64]pulsarwire.TxnID{}
	}
	for _, e := range ids {
		s.txnAcks[e] = id
	}
	s.offConsumers(m)
	return 0, "", true
}

// offConsumers takes the whole entries an individual ACK in a
// transaction names off their consumers (Shared and Key_Shared), as
// Apache Pulsar does before it judges the ACK, taken or refused for a
// conflict: a refused one is then neither at a consumer (asking for it
// again by id does nothing) nor held by the transaction (its abort does
// not send it); it comes again only when the cursor is read again. The
// client acknowledges such entries again one by one
// (subscribe/txnack.go, retryAlone). Deliberately unlike Apache Pulsar,
// an ACK in a transaction the coordinator does not have open leaves
// them at their consumer, as it is refused. s.mu held.
func (s *subscription) offConsumers(m *pb.CommandAck) {
	if dispatcherOf(s.typ).ordered() {
		return
	}
	for _, mid := range m.GetMessageId() {
		if mid.GetLedgerId() != s.t.ledger || len(mid.GetAckSet()) > 0 {
			continue
		}
		if pe, ok := s.pending[mid.GetEntryId()]; ok {
			s.release(mid.GetEntryId(), pe)
		}
	}
}

// restoreTxnAcks gives back, after a restart, what an open transaction
// acknowledged here; the topic is not yet published.
func (s *subscription) restoreTxnAcks(id pulsarwire.TxnID, sa *txnSubAcks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range sa.Acks {
		if s.isAcked(e) {
			// Its end applied already, on the copy of the topic loaded
			// before (endOn): not held again.
			continue
		}
		if s.txnAcks == nil {
			s.txnAcks = map[uint64]pulsarwire.TxnID{}
		}
		s.txnAcks[e] = id
	}
	if sa.Cumulative > 0 {
		s.txnCum = &txnCumAck{txn: id, pos: sa.Cumulative - 1}
	}
}

// endTxn ends transaction id here: its acknowledgements apply (commit,
// the cursor saved before this returns) or its entries come again
// (abort).
func (s *subscription) endTxn(id pulsarwire.TxnID, commit bool, sa txnSubAcks) {
	s.mu.Lock()
	var released []uint64
	for _, e := range slices.Sorted(maps.Keys(s.txnAcks)) {
		if s.txnAcks[e] != id {
			continue
		}
		delete(s.txnAcks, e)
		if commit {
			s.ackEntry(e)
		} else if !s.isAcked(e) {
			released = append(released, e)
		}
	}
	if c := s.txnCum; c != nil && c.txn == id {
		s.txnCum = nil
		if commit {
			s.ackCumulative(c.pos, nil)
		} else {
			for e := s.markDelete; e <= c.pos; e++ {
				if !s.isAcked(e) {
					released = append(released, e)
				}
			}
		}
	}
	if !commit {
		s.redeliverReleased(released)
	}
	s.mu.Unlock()
	if commit {
		s.save()
	}
	s.wakeup()
}

// redeliverReleased sends again the entries an aborted transaction held,
// as Apache Pulsar does: on Shared and Key_Shared those entries, with
// their redelivery count raised; on Exclusive and Failover every
// unacknowledged entry of the consumers, in order, uncounted. s.mu held.
func (s *subscription) redeliverReleased(ids []uint64) {
	if len(ids) == 0 {
		return
	}
	if dispatcherOf(s.typ).ordered() {
		for e, pe := range s.pending {
			s.release(e, pe)
			s.addReplay(e, pe.hash)
		}
		for _, e := range ids {
			s.addReplay(e, -1)
		}
		return
	}
	for _, e := range ids {
		hash := int32(-1)
		if pe, ok := s.pending[e]; ok {
			s.release(e, pe)
			hash = pe.hash
		}
		s.addReplay(e, hash)
		s.redeliveries[e]++
	}
}

// txnRefusal is the code and message of a coordinator's refusal.
func txnRefusal(err error) (pb.ServerError, string, bool) {
	if e, ok := err.(*errTxn); ok {
		return e.code, e.msg, false
	}
	return pb.ServerError_UnknownError, err.Error(), false
}
