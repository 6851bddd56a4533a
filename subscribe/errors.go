package subscribe

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrClosed: the consumer was closed (by Close, or because its client
	// closed).
	ErrClosed = errors.New("subscribe: consumer closed")
	// ErrCumulativeAckNotAllowed: AckCumulative on a Shared or KeyShared
	// subscription, where messages are not delivered in order to one
	// consumer; Apache Pulsar refuses it too.
	ErrCumulativeAckNotAllowed = errors.New("subscribe: cumulative ack is not allowed on Shared and KeyShared subscriptions")
	// ErrForeignMessage: a message given to Ack, AckCumulative or Nack was
	// not received by this consumer.
	ErrForeignMessage = errors.New("subscribe: message was not received by this consumer")
	// ErrBatchAcrossTransactions: a message of a batch acknowledged in a
	// transaction while another message of it was acknowledged in
	// another, or outside any. The broker acknowledges an entry as a
	// whole, in one transaction or none.
	ErrBatchAcrossTransactions = errors.New("subscribe: the messages of one batch are acknowledged in more than one transaction")
	// ErrPartialBatch: a transaction committed (and aborted instead) while
	// it acknowledged only some messages of a batch.
	ErrPartialBatch = errors.New("subscribe: a batch is only partly acknowledged in the transaction")
	// ErrTransactionPastTimeout: an acknowledgement in a transaction whose
	// timeout has passed (its coordinator aborts it) is not sent; the
	// commit aborts instead and the message comes again.
	ErrTransactionPastTimeout = errors.New("subscribe: the transaction is past its timeout")
	// ErrSeekNotSupported: a seek to a message id on a consumer of several
	// topics, where the id names no single one.
	ErrSeekNotSupported = errors.New("subscribe: a seek to a message id needs a consumer of one topic")
	// ErrNotSingleActive: RedeliverUnacknowledged on a Shared or KeyShared
	// subscription.
	ErrNotSingleActive = errors.New("subscribe: redelivering everything unacknowledged needs an Exclusive or Failover subscription")
)

// SubscribeError is returned when a consumer could not subscribe: the
// broker refused for good (authorization, a topic that does not exist
// where creation is off, ...), or answered "not now" (ConsumerBusy,
// ServiceNotReady, ...) until OperationRetries ran out. errors.Is and
// errors.As see through it to the broker's error (for example
// pulsarwire.ErrConsumerBusy) and to pool.ErrRetriesExhausted.
type SubscribeError struct {
	Topic        string
	Subscription string
	Err          error
}

func (e *SubscribeError) Error() string {
	what := fmt.Sprintf("subscribe %s to %s", e.Subscription, e.Topic)
	// The retry loop names the operation the same way: say it once.
	if msg := e.Err.Error(); strings.HasPrefix(msg, what+": ") {
		return msg
	}
	return what + ": " + e.Err.Error()
}

func (e *SubscribeError) Unwrap() error { return e.Err }
