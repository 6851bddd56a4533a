package subscribe

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/internal/txn"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Message is one message received. Its fields are read-only; Payload
// aliases the buffer the message arrived in, which is reused only once
// nothing refers to any byte of it, so it stays valid for as long as it is
// referenced. That buffer is shared with the messages that arrived around
// it (up to 1 MiB): copy a payload kept for long while the rest go.
type Message struct {
	// ID is where the message lives: ledger, entry, partition (-1 for a
	// topic that is not partitioned) and index in its batch (-1 when not
	// batched).
	ID pulsarwire.MessageID
	// Topic is the full name of the topic or partition it came from.
	Topic string
	// Key is the partition key, "" when none.
	Key string
	// OrderingKey is the key KeyShared orders by when set, "" when none.
	OrderingKey string
	// Properties travel with the message; nil when there are none.
	Properties map[string]string
	Payload    []byte
	// PublishTime is when the producer published it (millisecond
	// precision).
	PublishTime time.Time
	// EventTime is what the producer said the message is about; the zero
	// time when it said nothing.
	EventTime time.Time
	// RedeliveryCount is how many times the broker delivered it before
	// (Shared and KeyShared subscriptions; Apache Pulsar keeps no count on
	// Exclusive and Failover).
	RedeliveryCount uint32

	pc   *partConsumer
	acks *batchAcks // nil when the entry holds one message
	// gen and epoch are the session it came on and the consumer epoch
	// it was received in (Superseded).
	gen, epoch uint64
}

// Superseded reports whether m will be delivered again whatever is done
// with it: the connection it came on was lost since (the broker sends
// again what was not acknowledged); on Exclusive and Failover a
// redelivery of everything (a nack there, RedeliverUnacknowledged) was
// asked since; or its batch entry was asked for again as a whole (part
// of it was acknowledged in a transaction that did not commit). Acting
// on it would act twice; its acknowledgement may still land first. False
// for a message this package did not deliver.
func (m *Message) Superseded() bool {
	pc := m.pc
	if pc == nil {
		return false
	}
	return !pc.current(m.gen) || m.epoch < pc.epoch.Load() || m.acks != nil && m.acks.again.Load()
}

// entryPos names an entry of a topic.
type entryPos struct{ ledger, entry uint64 }

// compare orders entries as the broker does: by ledger, then entry.
func (p entryPos) compare(q entryPos) int {
	if c := cmp.Compare(p.ledger, q.ledger); c != 0 {
		return c
	}
	return cmp.Compare(p.entry, q.entry)
}

// wire is the id of the entry as a whole, for ACK and REDELIVER.
func (p entryPos) wire() *pb.MessageIdData {
	return &pb.MessageIdData{LedgerId: proto.Uint64(p.ledger), EntryId: proto.Uint64(p.entry)}
}

// batchAcks tracks which messages of a batch entry were acknowledged:
// the entry is acknowledged on the broker once all of them were.
type batchAcks struct {
	pc      *partConsumer
	pos     entryPos
	n       int32
	left    atomic.Int32
	bits    []atomic.Uint64 // set: acknowledged
	partial atomic.Bool     // listed in the part's partialAcks
	// txn is the transaction its messages are acknowledged in, plain set
	// when one was acknowledged outside any: an entry is acknowledged on
	// the broker as a whole, so it is one or the other.
	txn   atomic.Pointer[txn.Txn]
	plain atomic.Bool
	// again: the entry was asked for again as a whole (its transaction
	// did not commit); the messages handed out before are Superseded.
	again atomic.Bool
}

func newBatchAcks(pc *partConsumer, pos entryPos, n int32) *batchAcks {
	b := &batchAcks{pc: pc, pos: pos, n: n, bits: make([]atomic.Uint64, (n+63)/64)}
	b.left.Store(n)
	return b
}

// reset forgets every acknowledgement of the batch: the transaction they
// were made in did not commit.
func (b *batchAcks) reset() {
	for i := range b.bits {
		b.bits[i].Store(0)
	}
	b.left.Store(b.n)
	b.txn.Store(nil)
}

// mark records message i as acknowledged; false when it already was.
func (b *batchAcks) mark(i int32) bool {
	if i < 0 || i >= b.n {
		return false
	}
	bit := uint64(1) << (i & 63)
	return b.bits[i>>6].Or(bit)&bit == 0
}

func (b *batchAcks) acked(i int32) bool { return b.bits[i>>6].Load()&(1<<(i&63)) != 0 }

// partialAcks lists the batches of a part with some but not all messages
// acknowledged, so that when such a batch comes again (nack, reconnect)
// its acknowledged messages are not delivered twice.
type partialAcks struct {
	mu sync.Mutex
	n  atomic.Int32
	m  map[entryPos]*batchAcks
}

func (p *partialAcks) add(b *batchAcks) {
	p.mu.Lock()
	p.m[b.pos] = b
	p.n.Store(int32(len(p.m)))
	p.mu.Unlock()
}

func (p *partialAcks) remove(b *batchAcks) {
	p.mu.Lock()
	if p.m[b.pos] == b {
		delete(p.m, b.pos)
	}
	p.n.Store(int32(len(p.m)))
	p.mu.Unlock()
}

// trimThrough forgets the batches at or before pos (acknowledged
// cumulatively).
func (p *partialAcks) trimThrough(pos entryPos) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	for k := range p.m {
		if k.compare(pos) <= 0 {
			delete(p.m, k)
		}
	}
	p.n.Store(int32(len(p.m)))
	p.mu.Unlock()
}

func (p *partialAcks) clear() {
	p.mu.Lock()
	clear(p.m)
	p.n.Store(0)
	p.mu.Unlock()
}

func (p *partialAcks) get(pos entryPos) *batchAcks {
	if p.n.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[pos]
}

// entry is an entry received and queued, not yet split into messages.
type entry struct {
	s       *session
	seq     uint64 // arrival number within the part
	cmd     *pb.CommandMessage
	md      *pb.MessageMetadata
	payload []byte
}

// parsed is the result of splitting an entry.
type parsed struct {
	msgs    []Message
	skipped int64 // messages not delivered: acknowledged already, compacted out, before a seek
}

// split turns an entry into its messages. Messages acknowledged before
// (the batch came again), compacted out, cleared in the broker's ack set
// or before a seek's batch index are left out and counted in skipped.
func (c *Consumer) split(e *entry, codecs *pulsarwire.Codecs) (parsed, error) {
	pc := e.s.pc
	md := e.md
	mid := e.cmd.GetMessageId()
	pos := entryPos{mid.GetLedgerId(), mid.GetEntryId()}
	base := Message{
		ID:              pulsarwire.MessageID{Ledger: pos.ledger, Entry: pos.entry, Partition: pc.partition, BatchIndex: -1},
		Topic:           pc.topic,
		PublishTime:     time.UnixMilli(int64(md.GetPublishTime())),
		RedeliveryCount: e.cmd.GetRedeliveryCount(),
		pc:              pc,
		gen:             e.s.gen,
		epoch:           pc.epoch.Load(),
	}
	payload := e.payload
	if ct := md.GetCompression(); ct != pb.CompressionType_NONE {
		out, err := codecs.Decompress(ct, nil, payload, int(md.GetUncompressedSize()), e.s.conn.MaxMessageSize())
		if err != nil {
			return parsed{}, fmt.Errorf("decompress %s entry %d:%d: %w", ct, pos.ledger, pos.entry, err)
		}
		payload = out
	}
	if md.NumMessagesInBatch == nil {
		m := base
		m.Key = md.GetPartitionKey()
		if ok := md.GetOrderingKey(); len(ok) > 0 {
			m.OrderingKey = string(ok)
		}
		if len(md.GetProperties()) > 0 {
			m.Properties = make(map[string]string, len(md.GetProperties()))
			for _, kv := range md.GetProperties() {
				m.Properties[kv.GetKey()] = kv.GetValue()
			}
		}
		if t := md.GetEventTime(); t != 0 {
			m.EventTime = time.UnixMilli(int64(t))
		}
		m.Payload = payload
		return parsed{msgs: []Message{m}}, nil
	}

	n := md.GetNumMessagesInBatch()
	if n <= 0 || int(n) > len(payload)/4+1 {
		return parsed{}, fmt.Errorf("batch of %d messages in %d bytes: %w", n, len(payload), pulsarwire.ErrCorrupt)
	}
	acks := pc.partial.get(pos)
	fresh := acks == nil
	if fresh {
		acks = newBatchAcks(pc, pos, n)
	}
	skipBefore := pc.takeSkip(pos)
	ackSet := e.cmd.GetAckSet()
	out := parsed{msgs: make([]Message, 0, n)}
	rest := payload
	for i := int32(0); i < n; i++ {
		m := base
		m.ID.BatchIndex, m.ID.BatchSize = i, n
		m.acks = acks
		var compacted bool
		var err error
		if rest, compacted, err = decodeSingle(rest, &m); err != nil {
			return parsed{}, fmt.Errorf("entry %d:%d, message %d of %d: %w", pos.ledger, pos.entry, i, n, err)
		}
		cleared := len(ackSet) > 0 && (int(i>>6) >= len(ackSet) || uint64(ackSet[i>>6])&(1<<(i&63)) == 0)
		if compacted || cleared || i < skipBefore {
			if acks.mark(i) {
				acks.left.Add(-1)
			}
			out.skipped++
			continue
		}
		if !fresh && acks.acked(i) {
			out.skipped++
			continue
		}
		out.msgs = append(out.msgs, m)
	}
	if len(rest) != 0 {
		return parsed{}, fmt.Errorf("entry %d:%d: %d bytes after %d messages: %w", pos.ledger, pos.entry, len(rest), n, pulsarwire.ErrCorrupt)
	}
	if len(out.msgs) == 0 {
		// Everything was acknowledged before: say so again.
		pc.partial.remove(acks)
		c.acks.add(pc, pos, int32(n))
	}
	return out, nil
}

// decodeSingle reads one message of a batch,
// [size u32][SingleMessageMetadata][payload], into m, by hand: this runs
// for every message received.
func decodeSingle(b []byte, m *Message) (rest []byte, compacted bool, err error) {
	if len(b) < 4 {
		return nil, false, fmt.Errorf("metadata size: %w", pulsarwire.ErrTruncated)
	}
	size := int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	if size > len(b)-4 {
		return nil, false, fmt.Errorf("metadata of %d bytes in %d: %w", size, len(b)-4, pulsarwire.ErrTruncated)
	}
	meta, b := b[4:4+size], b[4+size:]
	payloadSize := -1
	for len(meta) > 0 {
		num, typ, v, body, n := pulsarwire.ConsumeField(meta)
		if n < 0 {
			return nil, false, fmt.Errorf("metadata field %d: %w", num, pulsarwire.ErrCorrupt)
		}
		meta = meta[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // properties
			k, val, err := decodeKeyValue(body)
			if err != nil {
				return nil, false, err
			}
			if m.Properties == nil {
				m.Properties = make(map[string]string, 4)
			}
			m.Properties[k] = val
		case num == 2 && typ == protowire.BytesType: // partition_key
			m.Key = string(body)
		case num == 3 && typ == protowire.VarintType: // payload_size
			payloadSize = int(int32(v))
		case num == 4 && typ == protowire.VarintType: // compacted_out
			compacted = v != 0
		case num == 5 && typ == protowire.VarintType && v != 0: // event_time
			m.EventTime = time.UnixMilli(int64(v))
		case num == 7 && typ == protowire.BytesType: // ordering_key
			m.OrderingKey = string(body)
		}
	}
	if payloadSize < 0 || payloadSize > len(b) {
		return nil, false, fmt.Errorf("payload of %d bytes in %d: %w", payloadSize, len(b), pulsarwire.ErrTruncated)
	}
	m.Payload = b[:payloadSize:payloadSize]
	return b[payloadSize:], compacted, nil
}

func decodeKeyValue(b []byte) (k, v string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", fmt.Errorf("property: %w", pulsarwire.ErrCorrupt)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return "", "", fmt.Errorf("property: %w", pulsarwire.ErrCorrupt)
			}
			b = b[n:]
			continue
		}
		s, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", "", fmt.Errorf("property: %w", pulsarwire.ErrCorrupt)
		}
		switch num {
		case 1:
			k = string(s)
		case 2:
			v = string(s)
		}
		b = b[n:]
	}
	return k, v, nil
}
