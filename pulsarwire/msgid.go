package pulsarwire

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// MessageID names a message: the ledger and entry that hold it on the
// broker, the partition it was published to (-1: not partitioned) and its
// index inside a batch (-1: not batched).
//
// Its text form is "ledger:entry:partition:batchIndex", for example
// "17:4:-1:-1"; "earliest" and "latest" name the two ends of a topic.
type MessageID struct {
	Ledger     uint64
	Entry      uint64
	Partition  int32
	BatchIndex int32
	// BatchSize is how many messages the entry holds (0 when unknown). It
	// is carried along for acks but is not part of the identity.
	BatchSize int32
}

// Earliest and Latest are the positions before the first and after the
// last message of a topic, as the protocol spells them.
var (
	Earliest = MessageID{Ledger: math.MaxUint64, Entry: math.MaxUint64, Partition: -1, BatchIndex: -1}
	Latest   = MessageID{Ledger: math.MaxInt64, Entry: math.MaxInt64, Partition: -1, BatchIndex: -1}
)

// String returns the stable text form.
func (id MessageID) String() string {
	// One allocation, the string: the text is made on the stack (a
	// message's id is written for every message a handler gets).
	var buf [MaxMessageIDText]byte
	return string(id.AppendText(buf[:0]))
}

// MaxMessageIDText is the longest text form of a MessageID: two uint64s,
// two int32s and three colons.
const MaxMessageIDText = 2*20 + 2*11 + 3

// AppendText appends the text form (String's) to b.
func (id MessageID) AppendText(b []byte) []byte {
	switch id {
	case Earliest:
		return append(b, "earliest"...)
	case Latest:
		return append(b, "latest"...)
	}
	b = strconv.AppendUint(b, id.Ledger, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, id.Entry, 10)
	b = append(b, ':')
	b = appendIndex(b, id.Partition)
	b = append(b, ':')
	return appendIndex(b, id.BatchIndex)
}

// appendIndex appends a partition or batch index, most often -1 (none),
// which strconv takes its slow path for.
func appendIndex(b []byte, v int32) []byte {
	if v == -1 {
		return append(b, '-', '1')
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// ParseMessageID reads the text form written by String. The batch index
// may be left out ("ledger:entry:partition").
func ParseMessageID(s string) (MessageID, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "earliest":
		return Earliest, nil
	case "latest":
		return Latest, nil
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 && len(parts) != 4 {
		return MessageID{}, fmt.Errorf("message id %q: want ledger:entry:partition[:batchIndex]", s)
	}
	var id MessageID
	var err error
	if id.Ledger, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return MessageID{}, fmt.Errorf("message id %q: ledger: %w", s, err)
	}
	if id.Entry, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return MessageID{}, fmt.Errorf("message id %q: entry: %w", s, err)
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || p < -1 {
		return MessageID{}, fmt.Errorf("message id %q: partition must be -1 or more", s)
	}
	id.Partition, id.BatchIndex = int32(p), -1
	if len(parts) == 4 {
		b, err := strconv.ParseInt(parts[3], 10, 32)
		if err != nil || b < -1 {
			return MessageID{}, fmt.Errorf("message id %q: batch index must be -1 or more", s)
		}
		id.BatchIndex = int32(b)
	}
	return id, nil
}

// Compare orders ids by ledger, entry and batch index (the partition is
// not compared: ids of different partitions have no order).
func (id MessageID) Compare(o MessageID) int {
	switch {
	case id.Ledger != o.Ledger:
		return cmpU(id.Ledger, o.Ledger)
	case id.Entry != o.Entry:
		return cmpU(id.Entry, o.Entry)
	case id.BatchIndex < o.BatchIndex:
		return -1
	case id.BatchIndex > o.BatchIndex:
		return 1
	}
	return 0
}

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// Proto returns the wire form.
func (id MessageID) Proto() *pb.MessageIdData {
	m := &pb.MessageIdData{LedgerId: proto.Uint64(id.Ledger), EntryId: proto.Uint64(id.Entry)}
	if id.Partition != -1 {
		m.Partition = proto.Int32(id.Partition)
	}
	if id.BatchIndex != -1 {
		m.BatchIndex = proto.Int32(id.BatchIndex)
	}
	if id.BatchSize > 0 {
		m.BatchSize = proto.Int32(id.BatchSize)
	}
	return m
}

// MessageIDFromProto reads the wire form; nil gives Earliest.
func MessageIDFromProto(m *pb.MessageIdData) MessageID {
	if m == nil {
		return Earliest
	}
	return MessageID{
		Ledger:     m.GetLedgerId(),
		Entry:      m.GetEntryId(),
		Partition:  m.GetPartition(),
		BatchIndex: m.GetBatchIndex(),
		BatchSize:  m.GetBatchSize(),
	}
}
