// Package subscribe consumes Apache Pulsar subscriptions over a
// pool.Client: the consumers of docs/contract.md §4.
//
//	c, err := subscribe.New(ctx, client, subscribe.Options{
//		Topics:       []string{"orders"},
//		Subscription: "billing",
//	})
//	...
//	for {
//		m, err := c.Receive(ctx)
//		if err != nil { ... }
//		process(m.Payload)
//		c.Ack(ctx, m)
//	}
//	c.Close(ctx)
//
// # Subscriptions
//
// A subscription is a named, durable cursor the broker keeps; every
// consumer naming it shares it, and it outlives them. Its Type decides how
// its consumers share it: Shared (the default), Exclusive, Failover or
// KeyShared. A new subscription starts at the newest message (Latest)
// unless InitialPosition says Earliest; Rewind moves the stored cursor
// (a SEEK) every time a consumer starts. A second consumer of an Exclusive
// subscription is refused as busy; that is a "not now", so New keeps
// trying under the retries (by default every 5 s, without a limit) and
// returns once the first consumer left; with a limit it returns a
// *SubscribeError wrapping the broker's ConsumerBusy.
//
// # Topics
//
// A Consumer reads one stream from one or more topics: a list, or a
// regular expression over the full names of one namespace's topics.
// Inside, there is one consumer per topic, or per partition of a
// partitioned topic. The list is fetched again every PatternRefresh
// (30 s): topics that appear join, starting at their earliest message
// (they were created after the consumer started, so nothing in them is
// older than the subscription's intent); with a pattern, topics that are
// gone leave. Partitions added to a partitioned topic join the same way.
// Each topic or partition gets ReceiverQueue permits of its own, as in
// the Java and Go clients.
//
// # Flow control
//
// Each topic's consumer grants the broker ReceiverQueue (1000) permits
// when it subscribes, and grants what was taken once half the queue was
// taken, so the broker never has more than ReceiverQueue messages
// outstanding for it (a batch counts as its messages; the broker may send
// a batch that overshoots the permits left, as Apache Pulsar does). After
// a reconnect, what was queued from the old connection is dropped (the
// broker sends it again) and the whole queue is granted again.
//
// # Acknowledgements
//
// Ack marks one message; a batch's entry is acknowledged on the broker
// once all its messages are. Acknowledgements are grouped, as the Go
// client groups them: one ACK command per topic every AckGroupTime
// (100 ms) or once AckGroupSize (1000) messages are acknowledged, counting
// every message of a batch entry as the broker's unacked limit does, and
// before a seek, a redelivery and Close; a negative AckGroupTime sends each at once and
// waits for the broker's answer. AckCumulative is refused on Shared and
// KeyShared (ErrCumulativeAckNotAllowed). Nack and NackAfter ask for a
// message again after a delay (NackDelay: 1 min, the Go client's
// default): on Shared and KeyShared its entry alone, its redelivery
// count raised by the broker; on Exclusive and Failover every
// unacknowledged message of the topic, in order (the Java client's way,
// with a consumer epoch so that nothing sent before is delivered twice).
// Messages of a batch acknowledged before it came back are not delivered
// again. With a DeadLetterPolicy, an entry delivered MaxDeliveries times
// goes, message by message, to the dead-letter topic
// (<topic>-<subscription>-DLQ by default) through the client's shared
// producers, with the properties REAL_TOPIC and ORIGIN_MESSAGE_ID, and is
// acknowledged once receipted; this happens as it arrives, whether or not
// anyone is receiving.
//
// # Reconnection
//
// A consumer whose connection is lost, or that the broker closes
// (CLOSE_CONSUMER: a topic unloaded or moved, a cursor reset), looks its
// topic up again and subscribes again with the same name and consumer id
// under OperationRetries, then grants its permits again. If the retries
// run out, Receive returns the *SubscribeError once the queue is empty.
//
// # The hot path
//
// Nothing runs per message but the caller's Receive: a connection's
// reader goroutine queues each entry as it arrives (one lock), and
// Receive splits an entry into its messages when it reaches it
// (decompressing with pulsarwire.Codecs), decoding each message's
// metadata by hand, slicing payloads out of the entry's buffer and
// allocating the entry's messages in one slice. A Consumer runs one
// goroutine of its own for grouped acknowledgements and nack timers, one
// for refreshes when there is something to refresh, one for dead letters
// when there is a policy, and one per topic while it reconnects; Close
// stops and waits for all of them.
package subscribe
