package pulsarwire

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// A batch payload is its messages one after another, each as
// [SingleMessageMetadata size u32][SingleMessageMetadata][payload], the
// entry's MessageMetadata saying how many (num_messages_in_batch).

// AppendBatchMessage appends one message of a batch to dst. It sets
// smm.PayloadSize to len(payload).
func AppendBatchMessage(dst []byte, smm *pb.SingleMessageMetadata, payload []byte) ([]byte, error) {
	smm.PayloadSize = proto.Int32(int32(len(payload)))
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var err error
	dst, err = proto.MarshalOptions{}.MarshalAppend(dst, smm)
	if err != nil {
		return dst[:start], fmt.Errorf("encode batch message metadata: %w", err)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return append(dst, payload...), nil
}

// BatchMessage is one message read from a batch; Payload aliases the batch.
type BatchMessage struct {
	Meta    *pb.SingleMessageMetadata
	Payload []byte
}

// SplitBatch decodes the n messages of an uncompressed batch payload.
// Trailing bytes or fewer messages than n are errors.
func SplitBatch(payload []byte, n int) ([]BatchMessage, error) {
	if n < 0 {
		return nil, fmt.Errorf("batch of %d messages: %w", n, ErrCorrupt)
	}
	// Each message takes at least 4 bytes, so a lying count cannot make
	// us allocate more than the payload could hold.
	if n > len(payload)/4+1 {
		return nil, fmt.Errorf("batch of %d messages in %d bytes: %w", n, len(payload), ErrCorrupt)
	}
	out := make([]BatchMessage, 0, n)
	rest := payload
	for i := 0; i < n; i++ {
		if len(rest) < 4 {
			return nil, fmt.Errorf("batch message %d of %d: size: %w", i, n, ErrTruncated)
		}
		size := int(binary.BigEndian.Uint32(rest))
		if size > len(rest)-4 {
			return nil, fmt.Errorf("batch message %d of %d: metadata of %d bytes: %w", i, n, size, ErrTruncated)
		}
		smm := new(pb.SingleMessageMetadata)
		if err := proto.Unmarshal(rest[4:4+size], smm); err != nil {
			return nil, fmt.Errorf("batch message %d of %d: metadata: %v: %w", i, n, err, ErrCorrupt)
		}
		rest = rest[4+size:]
		ps := int(smm.GetPayloadSize())
		if ps < 0 || ps > len(rest) {
			return nil, fmt.Errorf("batch message %d of %d: payload of %d bytes in %d: %w", i, n, ps, len(rest), ErrTruncated)
		}
		out = append(out, BatchMessage{Meta: smm, Payload: rest[:ps:ps]})
		rest = rest[ps:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("batch of %d messages has %d bytes left over: %w", n, len(rest), ErrCorrupt)
	}
	return out, nil
}
