package pool

import (
	"fmt"
	"time"

	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pulsarwire"
)

// How large a message may be. Apache Pulsar's brokers read frames of up
// to max_message_size plus pulsarwire.FramePadding, and its clients hold
// an entry's payload (batched: each message with its single-message
// metadata) to max_message_size, leaving the frame's headers to the
// padding; a message too large to share a batch goes alone, unbatched (as
// the Java client sends a batch of one). The producers here do the same,
// so any payload of up to max_message_size goes, batching or not.

// fitsEntry reports whether an entry whose payload is n bytes, behind a
// header of room bytes, fits a broker taking maxMessageSize.
func fitsEntry(maxMessageSize, room, n int) bool {
	return n <= maxMessageSize && room+n <= pulsarwire.MaxFrameSize(maxMessageSize)
}

// MaxPayload is the largest payload that a message with m's key, ordering
// key and properties may carry to a broker whose max_message_size is
// maxMessageSize: all of it, unless its metadata outgrows the frame's
// padding.
func MaxPayload(maxMessageSize int, m Message) int {
	f := pulsarwire.MessageFields{Key: m.Key, OrderingKey: m.OrderingKey, Properties: m.Properties}
	h := pulsarwire.SendHeader{Message: f}
	if m.Txn != nil {
		h.Txn = &pulsarwire.TxnID{}
	}
	// The producer name is the broker's choice; allow it 256 bytes.
	room := pulsarwire.SendHeaderRoom(&h) + 256
	return min(maxMessageSize, pulsarwire.MaxFrameSize(maxMessageSize)-room)
}

// sendAloneLocked sends a message that no batch can hold as an entry of
// its own, unbatched, after the batches before it; it refuses one that
// does not fit even so, taking nothing.
func (pp *partProducer) sendAloneLocked(f *pulsarwire.MessageFields, payload []byte, size int64, tx *txn.Txn, done completer) error {
	b := batches.Get().(*batch)
	b.single, b.fields, b.firstSeq = true, *f, f.SequenceID
	b.setTxn(tx, pp.topic)
	b.room = pulsarwire.SendHeaderRoom(&pulsarwire.SendHeader{ProducerName: pp.name, Message: b.fields, Txn: b.header()})
	if !fitsEntry(pp.maxMessageSize, b.room, len(payload)) {
		b.recycle()
		return pp.tooLargeLocked(len(payload))
	}
	if pp.byKey {
		pp.flushKeyedLocked()
	} else {
		pp.flushLocked()
	}
	b.started = time.Now()
	b.buf = append(pp.getBuf(b.room + len(payload))[:b.room], payload...)
	pp.nextSeq++
	b.n, b.lastSeq, b.bytes = 1, f.SequenceID, size
	b.dones = append(b.dones, done)
	pp.sendLocked(b)
	return nil
}

// tooLargeLocked is the refusal of a payload of n bytes. The broker's
// limit is read under the lock: connect sets it anew on each connection.
func (pp *partProducer) tooLargeLocked(n int) error {
	return fmt.Errorf("publish to %s: a payload of %d bytes is over the broker's max_message_size of %d: %w",
		pp.topic, n, pp.maxMessageSize, ErrMessageTooLarge)
}
