package pulsarwire

import (
	"encoding/binary"
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// The producer's hot path: SEND frames and batch entries encoded by hand
// with protowire, so a message costs no protobuf reflection and no
// allocation. What these functions write decodes with ParseFrame and
// SplitBatch like anything AppendPayloadCommand and AppendBatchMessage
// write; the tests hold them to that.

// MessageFields are the fields a producer sets on one message.
type MessageFields struct {
	// Key is the partition key ("" = none).
	Key string
	// OrderingKey orders messages for KeyShared consumers ("" = none).
	OrderingKey string
	// Properties are encoded sorted by key, so equal maps give equal bytes.
	Properties map[string]string
	// EventTime is in Unix milliseconds (0 = none).
	EventTime uint64
	// SequenceID is the message's sequence id.
	SequenceID uint64
}

// AppendSingleMessage appends one message of a batch,
// [size u32][SingleMessageMetadata][payload], to dst.
func AppendSingleMessage(dst []byte, m *MessageFields, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = appendProperties(dst, 1, m.Properties)
	if m.Key != "" {
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, m.Key)
	}
	dst = protowire.AppendTag(dst, 3, protowire.VarintType)
	dst = protowire.AppendVarint(dst, uint64(int64(int32(len(payload)))))
	if m.EventTime != 0 {
		dst = protowire.AppendTag(dst, 5, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.EventTime)
	}
	if m.OrderingKey != "" {
		dst = protowire.AppendTag(dst, 7, protowire.BytesType)
		dst = protowire.AppendString(dst, m.OrderingKey)
	}
	dst = protowire.AppendTag(dst, 8, protowire.VarintType)
	dst = protowire.AppendVarint(dst, m.SequenceID)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return append(dst, payload...)
}

// SingleMessageSize is an upper bound of what AppendSingleMessage adds
// for m and a payload of n bytes, for deciding whether it fits a batch.
func SingleMessageSize(m *MessageFields, n int) int {
	size := 4 + 6 + 11 + 11 + n // sizes, payload_size, event_time, sequence_id
	if m.Key != "" {
		size += 1 + protowire.SizeBytes(len(m.Key))
	}
	if m.OrderingKey != "" {
		size += 1 + protowire.SizeBytes(len(m.OrderingKey))
	}
	for k, v := range m.Properties {
		size += 1 + protowire.SizeBytes(kvSize(k, v))
	}
	return size
}

func kvSize(k, v string) int {
	return 1 + protowire.SizeBytes(len(k)) + 1 + protowire.SizeBytes(len(v))
}

// appendProperties appends a map as repeated KeyValue field num, sorted by
// key. Up to 8 keys are sorted on the stack.
func appendProperties(dst []byte, num protowire.Number, props map[string]string) []byte {
	if len(props) == 0 {
		return dst
	}
	var small [8]string
	keys := small[:0]
	if len(props) > len(small) {
		keys = make([]string, 0, len(props))
	}
	for k := range props {
		keys = append(keys, k)
	}
	if len(keys) > 1 {
		sort.Strings(keys)
	}
	for _, k := range keys {
		v := props[k]
		dst = protowire.AppendTag(dst, num, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(kvSize(k, v)))
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendString(dst, k)
		dst = protowire.AppendTag(dst, 2, protowire.BytesType)
		dst = protowire.AppendString(dst, v)
	}
	return dst
}

// SendHeader is everything of a SEND frame but its payload.
type SendHeader struct {
	ProducerID uint64
	// SequenceID is the first message's; HighestSequenceID the last's
	// (set when the entry holds more than one message).
	SequenceID        uint64
	HighestSequenceID uint64
	// NumMessages is how many messages the entry holds.
	NumMessages int32
	// Batch says the payload is in the batch format (then
	// num_messages_in_batch is NumMessages, even when it is 1).
	Batch        bool
	ProducerName string
	// PublishTime is in Unix milliseconds.
	PublishTime uint64
	Compression pb.CompressionType
	// UncompressedSize is the payload's size before compression.
	UncompressedSize uint32
	// Message holds the entry's key, ordering key, properties and event
	// time. For a batch, Apache Pulsar's clients put the first message's
	// key and ordering key here (a KeyShared dispatcher reads them);
	// properties and event time then stay with each message.
	Message MessageFields
	// Txn is the transaction the entry is published in, nil for none. It
	// goes into both the CommandSend and the MessageMetadata: a broker may
	// go by either (Apache Pulsar's dispatcher reads the metadata's).
	Txn *TxnID
}

// SendHeaderRoom is an upper bound of the bytes PutSendHeader writes for h.
func SendHeaderRoom(h *SendHeader) int {
	n := 4 + 4 + 64 + 2 + 4 + 4 + 64 + protowire.SizeBytes(len(h.ProducerName))
	m := &h.Message
	if m.Key != "" {
		n += 1 + protowire.SizeBytes(len(m.Key))
	}
	if m.OrderingKey != "" {
		n += 2 + protowire.SizeBytes(len(m.OrderingKey))
	}
	if !h.Batch {
		for k, v := range m.Properties {
			n += 1 + protowire.SizeBytes(kvSize(k, v))
		}
	}
	if h.Txn != nil {
		n += 2*(1+10) + 2*(2+10) // in the command, then in the metadata
	}
	return n
}

// PutSendHeader completes a SEND frame in place: buf[payloadStart:] holds
// the payload, and the frame's sizes, CommandSend, checksum and
// MessageMetadata are written right before it, into the room the caller
// left (at least SendHeaderRoom(h) bytes). It returns the whole frame, a
// sub-slice of buf ending where buf ends. The payload is neither copied
// nor moved.
func PutSendHeader(buf []byte, payloadStart int, h *SendHeader) ([]byte, error) {
	if payloadStart > len(buf) {
		return nil, fmt.Errorf("send header: payload start %d past %d bytes", payloadStart, len(buf))
	}
	// Encode at the front of the room, then slide it up against the
	// payload (copy handles the overlap).
	hdr := buf[:0:payloadStart]
	hdr = append(hdr, 0, 0, 0, 0, 0, 0, 0, 0) // total size, command size
	send := sendSize(h)
	hdr = protowire.AppendTag(hdr, 1, protowire.VarintType)
	hdr = protowire.AppendVarint(hdr, uint64(pb.BaseCommand_SEND))
	hdr = protowire.AppendTag(hdr, 6, protowire.BytesType)
	hdr = protowire.AppendVarint(hdr, uint64(send))
	hdr = appendSend(hdr, h)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(hdr)-8))
	hdr = append(hdr, magicCRC32C>>8, magicCRC32C&0xff, 0, 0, 0, 0, 0, 0, 0, 0)
	mdStart := len(hdr)
	hdr = appendMetadata(hdr, h)
	if cap(hdr) != payloadStart {
		// append outgrew the room and moved to a new array.
		return nil, fmt.Errorf("send header: needs more than the %d bytes left for it", payloadStart)
	}
	binary.BigEndian.PutUint32(hdr[mdStart-4:], uint32(len(hdr)-mdStart))
	n := len(hdr)
	start := payloadStart - n
	copy(buf[start:payloadStart], hdr)
	frame := buf[start:]
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	crcFrom := mdStart - 4 // the metadata size, then metadata and payload
	binary.BigEndian.PutUint32(frame[crcFrom-4:], Checksum(frame[crcFrom:]))
	return frame, nil
}

func sendSize(h *SendHeader) int {
	n := 1 + protowire.SizeVarint(h.ProducerID) + 1 + protowire.SizeVarint(h.SequenceID)
	if h.NumMessages != 1 {
		n += 1 + protowire.SizeVarint(uint64(int64(h.NumMessages)))
	}
	if h.HighestSequenceID > h.SequenceID {
		n += 1 + protowire.SizeVarint(h.HighestSequenceID)
	}
	if h.Txn != nil {
		n += 2 + protowire.SizeVarint(h.Txn.Least) + protowire.SizeVarint(h.Txn.Most)
	}
	return n
}

func appendSend(dst []byte, h *SendHeader) []byte {
	dst = protowire.AppendTag(dst, 1, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.ProducerID)
	dst = protowire.AppendTag(dst, 2, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.SequenceID)
	if h.NumMessages != 1 {
		dst = protowire.AppendTag(dst, 3, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(int64(h.NumMessages)))
	}
	if h.Txn != nil {
		dst = protowire.AppendTag(dst, 4, protowire.VarintType)
		dst = protowire.AppendVarint(dst, h.Txn.Least)
		dst = protowire.AppendTag(dst, 5, protowire.VarintType)
		dst = protowire.AppendVarint(dst, h.Txn.Most)
	}
	if h.HighestSequenceID > h.SequenceID {
		dst = protowire.AppendTag(dst, 6, protowire.VarintType)
		dst = protowire.AppendVarint(dst, h.HighestSequenceID)
	}
	return dst
}

func appendMetadata(dst []byte, h *SendHeader) []byte {
	m := &h.Message
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendString(dst, h.ProducerName)
	dst = protowire.AppendTag(dst, 2, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.SequenceID)
	dst = protowire.AppendTag(dst, 3, protowire.VarintType)
	dst = protowire.AppendVarint(dst, h.PublishTime)
	if !h.Batch {
		dst = appendProperties(dst, 4, m.Properties)
	}
	if m.Key != "" {
		dst = protowire.AppendTag(dst, 6, protowire.BytesType)
		dst = protowire.AppendString(dst, m.Key)
	}
	if h.Compression != pb.CompressionType_NONE {
		dst = protowire.AppendTag(dst, 8, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.Compression))
		dst = protowire.AppendTag(dst, 9, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(h.UncompressedSize))
	}
	if h.Batch {
		dst = protowire.AppendTag(dst, 11, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(int64(h.NumMessages)))
	}
	if !h.Batch && m.EventTime != 0 {
		dst = protowire.AppendTag(dst, 12, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.EventTime)
	}
	if m.OrderingKey != "" {
		dst = protowire.AppendTag(dst, 18, protowire.BytesType)
		dst = protowire.AppendString(dst, m.OrderingKey)
	}
	if h.Txn != nil {
		dst = protowire.AppendTag(dst, 22, protowire.VarintType)
		dst = protowire.AppendVarint(dst, h.Txn.Least)
		dst = protowire.AppendTag(dst, 23, protowire.VarintType)
		dst = protowire.AppendVarint(dst, h.Txn.Most)
	}
	return dst
}
