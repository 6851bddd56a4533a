package broker

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// noRequest is the request id Apache Pulsar puts in commands it sends on
// its own (a CLOSE_CONSUMER, an ERROR before CONNECTED): -1 as uint64.
const noRequest = ^uint64(0)

// entryInfo is what dispatch needs to know of a stored entry, read from its
// MessageMetadata without decoding all of it.
type entryInfo struct {
	numMessages int32 // num_messages_in_batch, 1 when absent
	batched     bool  // num_messages_in_batch was present
	key         []byte
	publishTime uint64
	deliverAt   int64 // deliver_at_time, ms; 0 when absent
	marker      int32 // marker_type; 0 when absent (a message)
	// txn is the transaction the entry was published in, when inTxn.
	txn   pulsarwire.TxnID
	inTxn bool
}

var errBadEntry = errors.New("stored entry is not a message")

// scanEntry reads the fields of an entry's MessageMetadata that dispatch
// uses: the batch size and the sticky key (ordering key, else partition
// key). The entry is [0x0e01 crc32c]? [size u32][metadata][payload].
func scanEntry(entry []byte) (entryInfo, error) {
	info := entryInfo{numMessages: 1}
	b := entry
	if len(b) >= 6 && binary.BigEndian.Uint16(b) == 0x0e01 {
		b = b[6:]
	}
	if len(b) < 4 {
		return info, errBadEntry
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return info, errBadEntry
	}
	md := b[4 : 4+n]
	var partitionKey, orderingKey []byte
	for len(md) > 0 {
		num, typ, v, body, l := pulsarwire.ConsumeField(md)
		if l < 0 {
			return info, errBadEntry
		}
		md = md[l:]
		switch {
		case num == 11 && typ == protowire.VarintType: // num_messages_in_batch
			info.numMessages, info.batched = int32(v), true
		case num == 3 && typ == protowire.VarintType: // publish_time
			info.publishTime = v
		case num == 19 && typ == protowire.VarintType: // deliver_at_time
			info.deliverAt = int64(v)
		case num == 6 && typ == protowire.BytesType: // partition_key
			partitionKey = body
		case num == 18 && typ == protowire.BytesType: // ordering_key
			orderingKey = body
		case num == 20 && typ == protowire.VarintType: // marker_type
			info.marker = int32(v)
		case num == 22 && typ == protowire.VarintType: // txnid_least_bits
			info.txn.Least, info.inTxn = v, true
		case num == 23 && typ == protowire.VarintType: // txnid_most_bits
			info.txn.Most = v
		}
	}
	if info.numMessages < 1 {
		info.numMessages = 1
	}
	switch {
	case len(orderingKey) > 0:
		info.key = orderingKey
	case len(partitionKey) > 0:
		info.key = partitionKey
	default:
		info.key = noneKey
	}
	return info, nil
}

// noneKey is Apache Pulsar's sticky key for messages without one.
var noneKey = []byte("NONE_KEY")

// appendMessageHead appends what of a MESSAGE frame carrying a stored
// entry of entryLen bytes comes before the entry (sizes and the command),
// encoding the command by hand: this is the hot path of every consumer.
// The entry follows verbatim (conn.doneWith).
func appendMessageHead(dst []byte, consumerID, ledger, entryID uint64, partition int32, redelivery uint32, ackSet []int64, epoch uint64, hasEpoch bool, entryLen int) []byte {
	// MessageIdData
	var idb [40]byte
	id := idb[:0]
	id = protowire.AppendTag(id, 1, protowire.VarintType)
	id = protowire.AppendVarint(id, ledger)
	id = protowire.AppendTag(id, 2, protowire.VarintType)
	id = protowire.AppendVarint(id, entryID)
	if partition >= 0 {
		id = protowire.AppendTag(id, 3, protowire.VarintType)
		id = protowire.AppendVarint(id, uint64(partition))
	}
	msgLen := 1 + protowire.SizeVarint(consumerID) + 1 + protowire.SizeBytes(len(id))
	if redelivery > 0 {
		msgLen += 1 + protowire.SizeVarint(uint64(redelivery))
	}
	for _, w := range ackSet {
		msgLen += 1 + protowire.SizeVarint(uint64(w))
	}
	if hasEpoch {
		msgLen += 1 + protowire.SizeVarint(epoch)
	}
	cmdLen := 2 + 1 + protowire.SizeBytes(msgLen) // type tag+value(9), message field
	total := 4 + cmdLen + entryLen
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, uint32(cmdLen))
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(pb.BaseCommand_MESSAGE))
	dst = protowire.AppendTag(dst, 9, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(msgLen))
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, consumerID)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendBytes(dst, id)
	if redelivery > 0 {
		dst = protowire.AppendTag(dst, 3, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(redelivery))
	}
	for _, w := range ackSet {
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(w))
	}
	if hasEpoch {
		dst = protowire.AppendTag(dst, 5, protowire.VarintType)
		dst = protowire.AppendVarint(dst, epoch)
	}
	return dst
}

// appendReceipt appends a SEND_RECEIPT frame, by hand for the same reason.
func appendReceipt(dst []byte, producerID, seq, highest, ledger, entryID uint64, hasHighest bool) []byte {
	var idb [24]byte
	id := idb[:0]
	id = protowire.AppendTag(id, 1, protowire.VarintType)
	id = protowire.AppendVarint(id, ledger)
	id = protowire.AppendTag(id, 2, protowire.VarintType)
	id = protowire.AppendVarint(id, entryID)
	rLen := 1 + protowire.SizeVarint(producerID) + 1 + protowire.SizeVarint(seq) + 1 + protowire.SizeBytes(len(id))
	if hasHighest {
		rLen += 1 + protowire.SizeVarint(highest)
	}
	cmdLen := 2 + 1 + protowire.SizeBytes(rLen)
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+cmdLen))
	dst = binary.BigEndian.AppendUint32(dst, uint32(cmdLen))
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(pb.BaseCommand_SEND_RECEIPT))
	dst = protowire.AppendTag(dst, 7, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(rLen))
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, producerID)
	dst = protowire.AppendTag(dst, 2, protowire.VarintType)
	dst = protowire.AppendVarint(dst, seq)
	dst = protowire.AppendTag(dst, 3, protowire.BytesType)
	dst = protowire.AppendBytes(dst, id)
	if hasHighest {
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, highest)
	}
	return dst
}

// appendCmd encodes a command; an encoding error is a bug (a required field
// left unset), reported and the frame skipped.
func appendCmd(dst []byte, m proto.Message) ([]byte, error) {
	out, err := pulsarwire.AppendCommand(dst, pulsarwire.Wrap(m))
	if err != nil {
		return dst, fmt.Errorf("encode %T: %w", m, err)
	}
	return out, nil
}
