package subscribe

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Type is how the consumers of one subscription share it: the one
// definition, pulsarwire.SubscriptionType, which package pipelines uses
// too. The zero value is Shared.
type Type = pulsarwire.SubscriptionType

// Subscription types.
const (
	// Shared: every consumer gets messages; each message goes to one of
	// them; order is not kept. Cumulative acks are refused.
	Shared = pulsarwire.Shared
	// Exclusive: one consumer at a time. A second one gets "consumer busy"
	// and, by default, waits (retrying every 5 s) until the first leaves.
	Exclusive = pulsarwire.Exclusive
	// Failover: one consumer is active (per partition), the others stand
	// by; order is kept. The broker says who is active with
	// ACTIVE_CONSUMER_CHANGE (see Options.OnActiveChange).
	Failover = pulsarwire.Failover
	// KeyShared: every key (ordering key, else partition key) goes to one
	// consumer at a time, in order.
	KeyShared = pulsarwire.KeyShared
)

// ParseType reads a type name, case-insensitively: shared, exclusive,
// failover, key_shared (or keyshared, key-shared).
func ParseType(s string) (Type, error) {
	t, err := pulsarwire.ParseSubscriptionType(s)
	if err != nil {
		return "", fmt.Errorf("subscription type %w", err)
	}
	return t, nil
}

// InitialPosition is where a subscription that does not exist yet starts.
// It does nothing to an existing subscription (see Options.Rewind).
type InitialPosition int

const (
	// Latest: the subscription starts after the newest message. The
	// default.
	Latest InitialPosition = iota
	// Earliest: the subscription starts at the oldest message kept.
	Earliest
)

func (p InitialPosition) wire() pb.CommandSubscribe_InitialPosition {
	if p == Earliest {
		return pb.CommandSubscribe_Earliest
	}
	return pb.CommandSubscribe_Latest
}

// DeadLetterPolicy sends a message that was delivered MaxDeliveries times
// without being acknowledged to a dead-letter topic instead of delivering
// it again, then acknowledges it.
//
// Apache Pulsar counts redeliveries on Shared and KeyShared subscriptions
// only; on Exclusive and Failover the count stays 0, so the policy never
// fires there.
type DeadLetterPolicy struct {
	// MaxDeliveries is how many times a message is handed to the
	// application; the delivery after that goes to the dead-letter topic.
	// Required (> 0).
	MaxDeliveries int
	// Topic is the dead-letter topic. Default
	// "<topic>-<subscription>-DLQ", the topic being the one the message
	// came from (a partitioned topic's own name, not the partition's), as
	// the Java and Go clients name it.
	Topic string
}

// Options configure a Consumer. Subscription and one of Topics or Pattern
// are required; every other field has a working zero value, the default
// written beside it.
type Options struct {
	// Topics to consume, read as one stream. Short names are accepted
	// ("orders" is persistent://public/default/orders). A partitioned
	// topic is consumed partition by partition; partitions added later
	// join at the next refresh (see PatternRefresh).
	Topics []string

	// Pattern is a regular expression (Go syntax) matched against whole
	// topic names, persistent://tenant/namespace/name, of one namespace;
	// a partition matches when its partitioned topic's name does. The
	// tenant and namespace must be written literally. A pattern without
	// "://" is taken as persistent://public/default/<pattern> (or
	// persistent://<pattern> when it names tenant/namespace/...).
	// Topics and Pattern exclude each other.
	Pattern string

	// Subscription is the name of the subscription: a cursor the broker
	// keeps for it, shared by every consumer that names it. Required.
	Subscription string

	// Type of the subscription. Default Shared.
	Type Type

	// InitialPosition is where a new subscription starts. Default Latest.
	// Topics that join a running consumer later (found by a refresh of
	// Pattern, or partitions added to a partitioned topic) always start
	// at Earliest: everything in them was published after the consumer
	// started.
	InitialPosition InitialPosition

	// Rewind, when set, moves the subscription's stored cursor (a SEEK)
	// every time the consumer starts, before anything is received: not
	// only the first time. The zero Position means no rewind (the
	// default). A message id may only be used with a single topic (for a
	// partitioned topic, the id's partition is moved).
	Rewind Position

	// Name is the consumer's name, which Failover uses to pick the active
	// consumer (lowest name first) and KeyShared to spread keys. Default:
	// a random name.
	Name string

	// ReceiverQueue is how many messages the broker may send ahead to
	// each topic or partition consumed: the flow permits granted. More
	// are granted each time fewer than half remain, and the whole queue
	// again after every reconnect. Default 1000.
	ReceiverQueue int

	// AckGroupTime is how long acknowledgements are collected before
	// they go to the broker in one ACK command (the Go client's default
	// grouping): 100 ms by default. A group also goes out when it holds
	// AckGroupSize acks, and on Close. Negative: every Ack is sent at
	// once and waits for the broker's answer.
	AckGroupTime time.Duration
	// AckGroupSize is the most messages whose acknowledgements wait in a
	// group: a batch entry counts each of its messages, as the broker's
	// limit of unacknowledged messages (50,000 a consumer) does. Default
	// 1000.
	AckGroupSize int

	// NackDelay is how long a negatively acknowledged message waits
	// before the broker is asked to deliver it again. Default 1 min (the
	// Go client's).
	NackDelay time.Duration

	// DeadLetter, when set, sends messages delivered too many times to a
	// dead-letter topic (published through the client's shared producers).
	// Default nil: no dead-letter topic.
	DeadLetter *DeadLetterPolicy

	// PatternRefresh is how often the topics of Pattern are listed again
	// (GET_TOPICS_OF_NAMESPACE), so that new topics join and deleted ones
	// leave, and how often the partition counts of partitioned Topics are
	// checked for growth. Default 30 s.
	PatternRefresh time.Duration

	// Retries overrides the client's OperationRetries for subscribing and
	// re-subscribing; zero fields take the client's values. By default a
	// consumer that the broker answers "not now" (ConsumerBusy on an
	// Exclusive subscription, ServiceNotReady, ...) tries again every 5 s
	// without a limit. With a limit, New fails with a *SubscribeError.
	Retries pool.OperationRetries

	// ReadCompacted reads a compacted topic's compacted view (the last
	// message of each key up to the compaction horizon), then the topic as
	// it is after it, as Apache Pulsar's readCompacted. Exclusive and
	// Failover only (the broker refuses the others). Default false.
	ReadCompacted bool

	// OnActiveChange, when set, is told when the broker makes this
	// consumer active or inactive on a topic (Failover; ACTIVE_CONSUMER_
	// CHANGE). It runs on a connection's reader goroutine: it must return
	// quickly. Default nil.
	OnActiveChange func(topic string, active bool)

	// Logger receives reconnection and refresh events. Default: the
	// client's logger.
	Logger *slog.Logger
}

// Defaults, as documented on Options.
const (
	DefaultReceiverQueue  = 1000
	DefaultAckGroupTime   = 100 * time.Millisecond
	DefaultAckGroupSize   = 1000
	DefaultNackDelay      = time.Minute
	DefaultPatternRefresh = 30 * time.Second
)

func (o Options) withDefaults(c *pool.Client) Options {
	if t, ok := o.Type.Canonical(); ok {
		o.Type = t // "" is Shared; the checks read the canonical spelling
	}
	if o.ReceiverQueue <= 0 {
		o.ReceiverQueue = DefaultReceiverQueue
	}
	if o.AckGroupTime == 0 {
		o.AckGroupTime = DefaultAckGroupTime
	}
	if o.AckGroupSize <= 0 {
		o.AckGroupSize = DefaultAckGroupSize
	}
	if o.NackDelay <= 0 {
		o.NackDelay = DefaultNackDelay
	}
	if o.PatternRefresh <= 0 {
		o.PatternRefresh = DefaultPatternRefresh
	}
	base := c.Options().OperationRetries
	if o.Retries.Attempts == 0 {
		o.Retries.Attempts = base.Attempts
	}
	if o.Retries.Delay <= 0 {
		o.Retries.Delay = base.Delay
	}
	if o.Retries.Timeout <= 0 {
		o.Retries.Timeout = base.Timeout
	}
	if o.Name == "" {
		var b [5]byte
		_, _ = rand.Read(b[:])
		o.Name = hex.EncodeToString(b[:])
	}
	if o.Logger == nil {
		o.Logger = c.Options().Logger
	}
	return o
}

// Validate reports what New would refuse in o before connecting: a
// missing subscription, neither or both of Topics and Pattern, a bad
// topic name or pattern, a rewind to a message id over several topics.
func (o *Options) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	if o.Pattern != "" {
		if _, _, _, err := compilePattern(o.Pattern); err != nil {
			return err
		}
	}
	return nil
}

func (o *Options) validate() error {
	if o.Subscription == "" {
		return errors.New("subscribe: Options.Subscription is required")
	}
	if (len(o.Topics) == 0) == (o.Pattern == "") {
		return errors.New("subscribe: set either Options.Topics or Options.Pattern")
	}
	for _, t := range o.Topics {
		if _, err := pulsarwire.ParseTopic(t); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
	}
	if _, ok := o.Type.Canonical(); !ok {
		return fmt.Errorf("subscribe: unknown subscription type %q", string(o.Type))
	}
	if o.InitialPosition != Latest && o.InitialPosition != Earliest {
		return fmt.Errorf("subscribe: unknown initial position %d", int(o.InitialPosition))
	}
	if o.Rewind.kind == posID && (o.Pattern != "" || len(o.Topics) != 1) {
		return errors.New("subscribe: a rewind to a message id needs exactly one topic")
	}
	if d := o.DeadLetter; d != nil && d.MaxDeliveries <= 0 {
		return errors.New("subscribe: DeadLetterPolicy.MaxDeliveries must be more than 0")
	}
	return nil
}
