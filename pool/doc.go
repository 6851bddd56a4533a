// Package pool is streamrun's Pulsar client core: a lookup through the
// service URL, one pooled connection per broker, and the producers on
// them. Package subscribe builds consumers on the same client; the
// connections themselves (the wire) are internal to the module.
//
// # Publishing
//
//	c, err := pool.New(ctx, pool.Options{ServiceURL: "pulsar://127.0.0.1:6650"})
//	...
//	defer c.Close(ctx)
//	id, err := c.Publish(ctx, "orders", pool.Message{Payload: b, Key: "customer-17"})
//	c.PublishAsync(ctx, "orders", pool.Message{Payload: b}, func(id pulsarwire.MessageID, err error) { ... })
//
// The first publish to a topic opens its producer: PARTITIONED_METADATA,
// then a LOOKUP of the topic (or of each partition) and PRODUCER on the
// owner's connection. Every publisher of the client shares it
// ((*Client).Producer returns it). Messages are batched (1000 messages,
// 128 KiB or 10 ms by default) and each batch goes out as one frame; the
// receipt of a batch completes its messages in order, with their
// MessageIDs. Publishing blocks while the producer's pending messages
// (ProducerOptions.MaxPendingMessages) or the client's pending bytes
// (Options.MemoryLimit) are at their limit; nothing is dropped.
//
// ProducerOptions.AccessMode and (*Client).OpenProducer make producers
// exclusive (Apache Pulsar's access modes, with the topic epoch named on
// reconnect); a producer refused ProducerFenced fails for good and stays
// failed until it is opened again (AccessMode).
//
// A batch's entry carries its first message's key, and a KeyShared
// subscription dispatches the whole entry by it. For topics consumed
// with KeyShared, set BatchingOptions.ByKey: each key (ordering key, else
// key) then gets a batch of its own, within the same limits, and the
// batches go out in order of their first messages.
//
// A message with a Key (or else an OrderingKey) goes to the partition
// KeyPartition picks: Java's String.hashCode, as the Java client's default
// router does. Messages without a key go round robin, batch by batch.
//
// # Connections
//
// The client keeps one connection per broker address, shared by every
// producer, consumer and lookup. Lookups follow redirects (carrying
// `authoritative`, at most 20 hops) and honour
// proxy_through_service_url: the connection then goes to the service URL
// and names the broker in CONNECT (proxy_to_broker_url). A comma list of
// service hosts is tried in turn. Each connection sends PING every
// KeepAliveInterval and is declared dead when nothing came back for an
// interval after one; a dead or dropped connection is replaced on demand,
// its producers are re-created (a new lookup each) and resend, in order
// and with their original sequence ids, every batch that has no receipt
// yet; its consumers (package subscribe) subscribe again.
//
// # Retries
//
// An operation the broker answers with "not now" (Retryable: ServiceNotReady,
// TooManyRequests, ProducerBusy, ..., timeouts, lost connections) is
// tried again under OperationRetries: by default without a limit, 5 s
// apart, 30 s per try. With Attempts set, the last failure comes back as
// a *RetryError, which errors.Is-matches ErrRetriesExhausted and the
// server's sentinel (pulsarwire.ErrServiceNotReady, ...). Final errors
// (authentication, authorization, an untrusted TLS certificate, ...) are
// returned at once.
//
// Lookup, PartitionedTopicMetadata and TopicsOfNamespace make one attempt
// each; wrap a compound operation in RetryWith so that the whole of it is
// retried, stopping when the client closes.
//
// # Goroutines
//
// Each connection has a reader and a writer goroutine; a producer that
// lost its connection has one reconnecting it; once a partitioned topic
// has a producer, one goroutine looks for added partitions every
// ProducerOptions.PartitionRefresh; batch timers run briefly.
// Close stops and waits for all of them. The writer writes, with one
// writev, every frame queued since its last write, straight from the
// producers' batch buffers; there are no goroutines or channels per
// message.
package pool
