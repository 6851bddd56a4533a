package pool

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Options configure a Client. The zero value connects to
// pulsar://127.0.0.1:6650 with every default below.
type Options struct {
	// ServiceURL is where topics are looked up: pulsar://host:port or
	// pulsar+ssl://host:port, or a comma list of hosts
	// (pulsar://a:6650,b:6650,c), tried in turn; a host without a port
	// gets 6650 (pulsar) or 6651 (pulsar+ssl). It may name a DNS name, a
	// load balancer or a Pulsar proxy. Default "pulsar://127.0.0.1:6650".
	ServiceURL string

	// TLS applies to pulsar+ssl:// URLs.
	TLS TLSOptions

	// Token authenticates with Pulsar's "token" method. It is the token
	// itself, "file:PATH" (read at every connect, so a rotated file is
	// picked up; "file:///abs/path" works too) or "env:VAR". A leading
	// "token:" is dropped. Default "": no authentication.
	Token string

	// OperationRetries governs every operation the server may answer with
	// "not now": lookups, creating producers and, in package subscribe,
	// subscribing and reconnecting consumers.
	OperationRetries OperationRetries

	// ConnectionTimeout bounds dialing a broker plus the CONNECT
	// handshake. Default 10 s.
	ConnectionTimeout time.Duration

	// KeepAliveInterval is how often an idle-or-not connection sends PING;
	// a connection that received nothing for a whole interval after a PING
	// is declared dead, closed and replaced. Default 30 s.
	KeepAliveInterval time.Duration

	// MemoryLimit bounds the bytes of messages published but not yet
	// acknowledged by the broker, across all producers of the client.
	// Publishing blocks (never drops) while it is reached. Default 64 MiB;
	// negative: no limit.
	MemoryLimit int64

	// Producer holds the settings of the producers the client opens.
	Producer ProducerOptions

	// Dial, when set, opens the TCP connections (before TLS) instead of a
	// net.Dialer: for SOCKS, tunnels or tests. address is host:port.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)

	// Logger receives connection and reconnection events. Default: a
	// logger that discards everything.
	Logger *slog.Logger

	// OnRetry, when set, is called each time an operation failed with a
	// retryable error and is about to wait before its next attempt, so a
	// program can tell its user what it is waiting for. It runs on the
	// retrying goroutine and must not block. Default: nil.
	OnRetry func(RetryEvent)
	// OnRetryEnd, when set, is called once for each operation OnRetry was
	// told of, when it ends: with its last retry's Op, Attempt and Limit,
	// and Err the outcome, nil when it succeeded at last, else the error
	// it returns. With OnRetry a program knows what is being waited for
	// now (a readiness probe: not ready while the broker cannot be
	// reached). It runs on the retrying goroutine and must not block.
	// Default: nil.
	OnRetryEnd func(RetryEvent)
}

// TLSOptions configure pulsar+ssl:// connections. The zero value verifies
// the broker against the system's roots and checks its host name.
type TLSOptions struct {
	// CAFile is a PEM file of the certificate authorities to trust.
	// Default: the system's roots.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// brokers that authenticate clients by certificate. Default: none.
	CertFile string
	KeyFile  string
	// SkipHostnameVerification accepts a broker certificate signed by a
	// trusted authority whatever host name it names. Default false: the
	// name must match the host dialed.
	SkipHostnameVerification bool
	// InsecureSkipVerify accepts any certificate at all. Only for tests.
	// Default false.
	InsecureSkipVerify bool
}

// OperationRetries says how an operation the server answered with "not
// now" (see Retryable) is tried again.
type OperationRetries struct {
	// Attempts is the number of tries in all; 0 means no limit (the
	// default), 1 means no retries.
	Attempts int
	// Delay is the wait between tries. Default 5 s.
	Delay time.Duration
	// Timeout bounds each try. Default 30 s.
	Timeout time.Duration
}

// ProducerOptions configure the producers of a Client.
type ProducerOptions struct {
	// Batching groups messages into entries.
	Batching BatchingOptions

	// Compression compresses each entry: NoCompression (the default),
	// LZ4, ZLIB, ZSTD or Snappy.
	Compression Compression

	// MaxPendingMessages bounds the messages of one topic's producer that
	// were published but not yet acknowledged by the broker. Publishing
	// blocks (never drops) while it is reached. Default 10 000; negative:
	// no limit (Options.MemoryLimit still applies).
	MaxPendingMessages int

	// Name is the producer name sent to the broker; the broker picks a
	// unique one when empty (the default). A name must be unique per
	// topic, so set it only with one client per topic.
	Name string

	// AccessMode is how the client's producers share their topics with
	// other producers (Apache Pulsar's ProducerAccessMode): AccessShared
	// (the default), AccessExclusive, AccessWaitForExclusive or
	// AccessExclusiveWithFencing. (*Client).OpenProducer opens one
	// topic's producer with a mode of its own.
	AccessMode AccessMode

	// PartitionRefresh is how often the producers of partitioned topics
	// ask for the partition count and add producers for partitions that
	// were added. Default 60 s (Apache Pulsar's clients' default);
	// negative: never.
	PartitionRefresh time.Duration
}

// AccessMode is how a producer shares its topic with other producers.
//
// An exclusive producer (every mode but AccessShared) is given the
// topic's epoch by the broker; each one that takes the topic afresh
// moves the epoch on. It names that epoch when it reconnects, and the
// broker refuses it ProducerFenced when another exclusive producer took
// the topic meanwhile (or still holds it). ProducerFenced is final: the
// producer fails every pending and later message with an error matching
// pulsarwire.ErrProducerFenced, it is not reconnected, and the client
// keeps it in place, so that publishing to the topic goes on failing
// until (*Client).OpenProducer opens the topic's producer again. Only the
// one that opens it knows whether it may take the topic back.
type AccessMode int

const (
	// AccessShared: any number of shared producers publish together;
	// refused (ProducerBusy, retried) while an exclusive one holds the
	// topic.
	AccessShared AccessMode = iota
	// AccessExclusive: the only producer of the topic; refused
	// ProducerFenced when another producer is there.
	AccessExclusive
	// AccessWaitForExclusive: like AccessExclusive, but opening waits,
	// while the opening call's context and OperationRetries allow,
	// until the other producers have left.
	AccessWaitForExclusive
	// AccessExclusiveWithFencing: takes the topic from whatever
	// producers hold it, which the broker fences (their next message
	// fails, and so does their reconnect). It reconnects as
	// AccessExclusive naming its epoch, so that once fenced itself it
	// never takes the topic back from the producer that fenced it
	// (Apache Pulsar 4.0.8 lets a fencing producer that names an old
	// epoch close the current one's before refusing it:
	// broker/producer_access_test.go).
	AccessExclusiveWithFencing
)

func (m AccessMode) check() error {
	if m < AccessShared || m > AccessExclusiveWithFencing {
		return fmt.Errorf("unknown access mode %d (AccessShared, AccessExclusive, AccessWaitForExclusive, AccessExclusiveWithFencing)", int(m))
	}
	return nil
}

func (m AccessMode) String() string {
	switch m {
	case AccessShared:
		return "Shared"
	case AccessExclusive:
		return "Exclusive"
	case AccessWaitForExclusive:
		return "WaitForExclusive"
	case AccessExclusiveWithFencing:
		return "ExclusiveWithFencing"
	}
	return fmt.Sprintf("AccessMode(%d)", int(m))
}

// BatchingOptions say when a batch is closed and sent. A message never
// waits longer than MaxDelay in a batch.
type BatchingOptions struct {
	// Disabled sends every message as an entry of its own.
	Disabled bool
	// MaxMessages per batch. Default 1000.
	MaxMessages int
	// MaxBytes of messages per batch (capped by the broker's
	// max_message_size). Default 128 KiB.
	MaxBytes int
	// MaxDelay a batch waits for more messages. Default 10 ms.
	MaxDelay time.Duration
	// ByKey keeps one open batch per key (the ordering key, else the
	// key; messages with neither share one), so that every entry carries
	// one key's messages only. Turn it on for topics consumed with
	// KeyShared: the broker dispatches a whole entry by its first
	// message's key, so a batch mixing keys can take a key to two
	// consumers and out of order. The limits above apply to the open
	// batches together: when one is reached, or the oldest has waited
	// MaxDelay, all of them are sent, in order of their first messages.
	// Receipts then complete messages in order per key, not across keys.
	// What the Java client calls BatcherBuilder.KEY_BASED. Default false.
	ByKey bool
}

// Defaults, as documented on the fields.
const (
	DefaultServiceURL         = "pulsar://127.0.0.1:6650"
	DefaultConnectionTimeout  = 10 * time.Second
	DefaultKeepAliveInterval  = 30 * time.Second
	DefaultMemoryLimit        = 64 << 20
	DefaultRetryDelay         = 5 * time.Second
	DefaultRetryTimeout       = 30 * time.Second
	DefaultMaxPendingMessages = 10000
	DefaultBatchMaxMessages   = 1000
	DefaultBatchMaxBytes      = 128 << 10
	DefaultBatchMaxDelay      = 10 * time.Millisecond
	DefaultPartitionRefresh   = 60 * time.Second
)

func (o Options) withDefaults() Options {
	if o.ServiceURL == "" {
		o.ServiceURL = DefaultServiceURL
	}
	o.OperationRetries = o.OperationRetries.withDefaults()
	if o.ConnectionTimeout <= 0 {
		o.ConnectionTimeout = DefaultConnectionTimeout
	}
	if o.KeepAliveInterval <= 0 {
		o.KeepAliveInterval = DefaultKeepAliveInterval
	}
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	o.Producer = o.Producer.withDefaults()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func (r OperationRetries) withDefaults() OperationRetries {
	if r.Attempts < 0 {
		r.Attempts = 1
	}
	if r.Delay <= 0 {
		r.Delay = DefaultRetryDelay
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultRetryTimeout
	}
	return r
}

func (p ProducerOptions) withDefaults() ProducerOptions {
	if p.MaxPendingMessages == 0 {
		p.MaxPendingMessages = DefaultMaxPendingMessages
	}
	if p.PartitionRefresh == 0 {
		p.PartitionRefresh = DefaultPartitionRefresh
	}
	b := &p.Batching
	if b.MaxMessages <= 0 {
		b.MaxMessages = DefaultBatchMaxMessages
	}
	if b.MaxBytes <= 0 {
		b.MaxBytes = DefaultBatchMaxBytes
	}
	if b.MaxDelay <= 0 {
		b.MaxDelay = DefaultBatchMaxDelay
	}
	if b.Disabled {
		b.MaxMessages = 1
	}
	return p
}
