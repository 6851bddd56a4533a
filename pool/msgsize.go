package pool

import (
	"fmt"

	"github.com/streamrun/streamrun/pulsarwire"
)

// How large a message may be. Apache Pulsar's brokers read frames of up
// to max_message_size plus pulsarwire.FramePadding, and its clients hold
// an entry's payload (batched: each message with its single-message
// metadata) to max_message_size, leaving the frame's headers to the
// padding. The producers here apply the same rule, so a payload of
// exactly max_message_size goes when batching is off.

// fitsEntry reports whether an entry whose payload is n bytes, behind a
// header of room bytes, fits a broker taking maxMessageSize.
func fitsEntry(maxMessageSize, room, n int) bool {
	return n <= maxMessageSize && room+n <= pulsarwire.MaxFrameSize(maxMessageSize)
}

// MaxPayload is the largest payload that a message with m's key, ordering
// key and properties may carry to a broker whose max_message_size is
// maxMessageSize: all of it without batching, less the message's
// single-message metadata with batching.
func MaxPayload(maxMessageSize int, m Message, batched bool) int {
	if !batched {
		return maxMessageSize
	}
	f := pulsarwire.MessageFields{Key: m.Key, OrderingKey: m.OrderingKey, Properties: m.Properties}
	return maxMessageSize - pulsarwire.SingleMessageSize(&f, 0)
}

// tooLargeLocked is the refusal of a message with payload of n bytes that
// needs need bytes in an entry. The broker's limit is read under the
// lock: connect sets it anew on each connection.
func (pp *partProducer) tooLargeLocked(n, need int) error {
	if need > n {
		return fmt.Errorf("publish to %s: a payload of %d bytes plus %d bytes of batch metadata is over the broker's max_message_size of %d; the most that fits is %d bytes (%d without batching): %w",
			pp.topic, n, need-n, pp.maxMessageSize, pp.maxMessageSize-(need-n), pp.maxMessageSize, ErrMessageTooLarge)
	}
	return fmt.Errorf("publish to %s: a payload of %d bytes is over the broker's max_message_size of %d: %w",
		pp.topic, n, pp.maxMessageSize, ErrMessageTooLarge)
}
