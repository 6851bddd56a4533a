// Package runtime is the streamrun host: it runs pipelines, each a
// subscription whose messages go in batches to instances of a handler,
// whose outputs are published and whose messages are acknowledged once
// that is done. The host owns every broker connection (one pool.Client),
// consumer and producer; handlers run as plugin processes (package
// plugin), so a handler that panics, hangs or is killed costs a restart
// of its process and a retry of its batch, never a broker connection.
//
//	h, err := runtime.New(ctx, runtime.Options{Pool: pool.Options{ServiceURL: url}})
//	...
//	err = h.Run(ctx, pipeline) // until ctx ends, then a graceful stop
//
// Health and Stats report on the running pipelines; Options.Hooks tell
// metrics what happens as it happens. Options.LocalHandlers run a
// pipeline's handler in the host's own process instead of a plugin, the
// same way in every other respect: for tests, and as the baseline that
// BenchmarkPipeline compares the plugin path with.
//
// # From subscription to acknowledgement
//
// A pipeline's consumer (package subscribe) delivers messages; the host
// takes them while it holds fewer than Handler.MaxInFlight unsettled
// messages (received, and not yet acknowledged, handed back or
// dead-lettered). At that bound it stops taking, the consumer's queue
// fills, its permits are not granted again and the broker stops sending:
// a slow handler slows consumption, and nothing in between grows without
// bound.
//
// Messages are grouped in batches: a batch goes to a handler instance
// when it holds Handler.BatchSize messages, when its first message has
// waited Handler.BatchWait, or when the in-flight bound leaves no room to
// fill it. Each instance works on one batch at a time; while it does, the
// outputs of its previous batch are published.
//
// For each message the handler answers one of:
//
//   - ack: its outputs are published through the client's shared
//     producers, and the message is acknowledged once every output has
//     its send receipt (at-least-once). An output that fails to publish
//     turns the message into a retry (outputs already published stay:
//     they may be published again).
//   - retry: the message is handed back to the broker (a negative
//     acknowledgement) to be delivered again after the handler's delay,
//     or after ErrorPolicy.Backoff (1 s doubling to 1 min by default).
//     After ErrorPolicy.MaxRetries retries (no limit by default) it is
//     dead-lettered instead. Retries are counted by the broker's
//     redelivery count, or by the host where the broker keeps none
//     (Exclusive and Failover); a batched entry is redelivered whole, so
//     its messages share one count.
//   - dead-letter: the message is published to the dead-letter topic
//     (ErrorPolicy.DeadLetterTopic, by default
//     "<topic>-<subscription>-DLQ") with its key, properties and payload,
//     plus REAL_TOPIC, ORIGIN_MESSAGE_ID and DEAD_LETTER_REASON, and
//     acknowledged after its receipt.
//   - drop: the message is acknowledged, nothing published.
//
// The input's W3C trace context (traceparent and tracestate properties)
// is handed to the handler and copied onto its outputs unless it sets
// its own.
//
// # Order
//
// Where the subscription keeps order (Exclusive, Failover, KeyShared)
// the host keeps it per key: each message goes to the instance picked by
// a hash of its ordering key, else its key, else (no key) its topic or
// partition, so that one key's messages are all handled by one instance,
// in batches sent one after another, and their outputs published in that
// order. A batch retried after a crash is retried before the next one.
// What does not keep order is a retry the handler asks for: the message
// comes back later, after messages of its key that came after it (on
// Exclusive and Failover the broker sends every unacknowledged message
// of the topic again, as Apache Pulsar's clients do on a negative
// acknowledgement). With Shared subscriptions any instance takes the next
// batch and nothing is ordered.
//
// # Batches in flight
//
// An instance works on up to Handler.MaxBatchesInFlight batches at once
// (by default on Shared 8 for a plugin, whose round trip it hides, and 2
// for a handler in the host's process; 1 on the types that keep order,
// where more is refused): the next batches are
// sent while the last is still in the plugin, so that host and plugin
// process do not wait for each other. A pipeline with keyed state (at
// least once, no steps before the handler) sends its next batch while
// the last is out if the two share no key, and holds it back until then
// otherwise, so that each key's batches still go one after the other,
// each sent with the values the last one left (worker_keys.go).
// Past 2 at once, an instance gets more only while its last call took
// under a quarter of Handler.Timeout: a batch's timeout runs from its
// send, so a slow handler is not taken for hung for the batches queued
// ahead of one.
// The handler is called concurrently (an in-process handler too; a
// plugin's server runs one Process at a time but decodes and encodes the
// others meanwhile). Outputs are still published in the order the
// batches were sent, whatever order their answers come in, and
// MaxInFlight still bounds the messages held.
//
// # Crashes, hangs and poison messages
//
// A batch fails when the plugin process crashes (a panic, an exit, a
// kill, a broken connection: host.ErrCrashed), when it has not
// answered within Handler.Timeout (it is taken for hung and killed), or
// when it answers wrongly (host.ErrBadResponse; killed too). The batch
// is then retried on a fresh instance of the same slot, nothing of it
// having been published, and the broker connections, producers and
// consumers are not touched. An instance that dies between batches is
// restarted at once, not when the next batch comes. Restarts wait
// Options.Restart.Initial (100 ms), doubling with each crash in a row up
// to Max (30 s); a crash after the instance answered a batch starts the
// count over, since that handler makes progress: the backoff is for
// crash loops, and a backlog with a few poison messages in it is not
// slowed to one message per 30 s.
//
// A failed instance fails every batch in flight on it: all of them are
// retried on the fresh instance, the failure counted once. A failure
// that names no message, seen while another batch was in flight on the
// instance, is pinned on no batch (it may be the other's); until a batch
// sent alone is answered, the instance gets one batch at a time, so the
// strikes below fall on the batch that caused them. A panic that names a
// message is that message's wherever it was seen: a plugin that panicked
// answers the batches after with the same panic, and the host lets only
// its first report name a message (package plugin/host), so every crash
// the pipeline counts for a poison message is a strike against it.
//
// So that a message which crashes the handler every time cannot stop a
// pipeline, failures count against messages (ErrorPolicy.MaxCrashes, 3
// by default):
//
//   - A panic names the message being handled (host.CrashError.Index,
//     known for MessageFunc handlers): that message gets a strike, and
//     after MaxCrashes strikes it is dead-lettered with the panic as the
//     reason, and the rest of the batch goes on.
//   - A failure that names no message (exit, kill, hang, wrong answer, a
//     panic in a batch handler) counts against the batch: after
//     MaxCrashes such failures in a row the batch is split in two halves,
//     retried one after the other, and so on; a message that fails
//     MaxCrashes times alone is dead-lettered. A poison message in a
//     batch of n is found after about MaxCrashes × log2(n) restarts.
//
// A handler that keeps crashing (Restart.DegradedAfter crashes, 3 by
// default, within Restart.DegradedWindow, 1 min, or in a row without
// answering a batch) makes its pipeline StateDegraded in Health, with
// the last error, and its crashes are logged at ERROR; the host and its
// other pipelines run on. A pipeline fails, and Run stops the host with its error, only
// when it cannot start or its consumer gives up.
//
// Plugin processes die with the host, SIGKILL included (package plugin
// gives them the parent-death signal).
//
// # Stopping
//
// When Run's ctx ends the host stops taking messages; the batches
// already received are finished, their outputs published, their
// messages acknowledged; the producers are flushed, the consumers closed
// (sending the last acknowledgements) and the handlers closed (their
// Close runs), all within Options.ShutdownTimeout (20 s). What is not
// done by then is handed back: left unacknowledged, it is delivered again
// to the subscription's next consumer. An in-process handler that
// ignores its ctx cannot be interrupted, and the stop waits for it.
//
// # Change without a restart
//
// Host.Reload applies a new set of pipelines while Run runs: unchanged
// ones are not touched, removed ones drain and stop, new ones start, and
// changed ones change in place. A new handler (binary path or content,
// args, env, config) is rolled out one instance at a time, the new
// instance started and its Init answered before the old one takes no
// more batches; the old one finishes what it has, then closes. A change
// of batching, instances, outputs or error policy drains the pipeline's
// batches and runs on with the same consumer and instances; a change of
// source drains and subscribes anew. Everything that can fail is done
// before anything changes, so a refused reload leaves the host as it
// was. The broker connections are the client's and stay open.
//
// # Inside an instance slot
//
// Each instance slot has a supervisor (supervisor.go: starting,
// restarting after the backoff, replacing on a swap, the record Health
// reads), a dispatcher (worker.go: batches in flight, retries on a fresh
// instance, settling in batch order) and the poison-message rule as a
// pure step (bisect.go), each with unit tests against fake instances.
//
// # Goroutines
//
// Per pipeline: one receiving and forming batches, two per instance (one
// calling the handler, one publishing its answers), and one retrying
// messages whose outputs failed; Run starts them and waits for all of
// them before it returns.
package runtime
