// Package pipelines holds streamrun's pipeline files: what a file says,
// as Go values, with its defaults and its checks, and the loader that
// reads one (Load, Parse). It opens no connection; package runtime runs
// what it describes. docs/pipelines.md documents the format.
//
// The types map one to one onto the YAML of a pipeline file
// (docs/contract.md §8): every field carries the yaml (and json) name it
// has in the file, durations are time.Duration (written "5s", "250ms" in
// YAML), and the handler's config is free-form (map[string]any), handed
// to the plugin as JSON. A file looks like
//
//	service_url: pulsar://127.0.0.1:6650
//	pipelines:
//	  - name: shout
//	    source:
//	      topics: [in]
//	      subscription: shout
//	      type: key_shared
//	      initial_position: earliest
//	    handler:
//	      package: ./handlers/uppercase
//	      config: {output: persistent://public/default/out}
//	      batch_size: 100
//	      batch_wait: 10ms
//	      instances: 2
//	      timeout: 30s
//	    outputs: [persistent://public/default/out]
//	    error_policy:
//	      max_retries: 5
//	      backoff: {initial: 1s, max: 1m}
//
// Zero values mean "the default": a plain one is the field's default
// tag (written as in a file), one computed from other fields is stated in
// its comment, and WithDefaults fills them in. Each field's reload tag
// says what changing it does to a running host (see Reload).
//
// The loader parses with go.yaml.in/yaml/v3 (the YAML organisation's
// continuation of gopkg.in/yaml.v3) into its node tree and decodes that
// itself. The library is a port of libyaml, the YAML parser most Go
// programs use, with depth limits of its own; its nodes carry the line and column of every value
// and keep aliases unexpanded, so this package decides what an alias may
// cost, finds duplicate keys, expands ${VAR} in values only, and reports
// every problem as FILE:LINE:COL: field.path: what is wrong. (A decoder
// with a strict mode of its own, such as goccy/go-yaml, reports type
// errors in its own words and without the field's path.)
package pipelines

//go:generate go run ./internal/schemagen -src . -o ../docs/pipeline.schema.json

import (
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// File is the contents of one pipeline file: where the broker is, how to
// reach it, and the pipelines to run.
type File struct {
	// ServiceURL of the Pulsar cluster (pulsar://host:port,
	// pulsar+ssl://host:port, or a comma list of hosts). Default "": the
	// embedded broker.
	ServiceURL string `yaml:"service_url,omitempty" json:"service_url,omitempty" reload:"restart"`
	// TLS applies to pulsar+ssl:// service URLs.
	TLS TLS `yaml:"tls,omitempty" json:"tls,omitempty"`
	// Auth authenticates to the brokers.
	Auth Auth `yaml:"auth,omitempty" json:"auth,omitempty"`
	// OperationRetries governs operations the broker answers with "not
	// now" (lookups, producers, subscribing).
	OperationRetries OperationRetries `yaml:"operation_retries,omitempty" json:"operation_retries,omitempty"`
	// Telemetry says where metrics and health are served.
	Telemetry Telemetry `yaml:"telemetry,omitempty" json:"telemetry,omitempty"`
	// Control says where the control API and the web console are served
	// (docs/control.md).
	Control Control `yaml:"control,omitempty" json:"control,omitempty"`
	// Pipelines to run; at least one, with distinct names.
	Pipelines []Pipeline `yaml:"pipelines" json:"pipelines"`

	// places says where each field was written, for ErrorAt; nil for a
	// File made in Go.
	places *places
}

// TLS configures pulsar+ssl:// connections. The zero value verifies the
// broker against the system's roots and checks its host name.
type TLS struct {
	// CAFile is a PEM file of the authorities to trust. Default: the
	// system's roots.
	CAFile string `yaml:"ca_file,omitempty" json:"ca_file,omitempty" reload:"restart"`
	// CertFile and KeyFile are a client certificate and its key. Default:
	// none.
	CertFile string `yaml:"cert_file,omitempty" json:"cert_file,omitempty" reload:"restart"`
	KeyFile  string `yaml:"key_file,omitempty" json:"key_file,omitempty" reload:"restart"`
	// SkipHostnameVerification accepts a trusted certificate whatever
	// host it names. Default false.
	SkipHostnameVerification bool `yaml:"skip_hostname_verification,omitempty" json:"skip_hostname_verification,omitempty" reload:"restart"`
	// Insecure accepts any certificate. Only for tests. Default false.
	Insecure bool `yaml:"insecure,omitempty" json:"insecure,omitempty" reload:"restart"`
}

// Auth configures authentication.
type Auth struct {
	// Token for Pulsar's token authentication: the token itself,
	// "file:PATH" (read at every connect; a relative path starts at the
	// pipeline file's directory) or "env:VAR" (read when connecting, so
	// the secret stays out of the file). Default "": none.
	Token string `yaml:"token,omitempty" json:"token,omitempty" reload:"restart"`
}

// OperationRetries says how an operation the broker answered with "not
// now" is tried again (docs/contract.md §3).
type OperationRetries struct {
	// Attempts in all; 0 (the default) means no limit, 1 no retries.
	Attempts int `yaml:"attempts,omitempty" json:"attempts,omitempty" reload:"restart"`
	// Delay between attempts. Default 5s.
	Delay time.Duration `yaml:"delay,omitempty" json:"delay,omitempty" reload:"restart"`
	// Timeout of each attempt. Default 30s.
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty" reload:"restart"`
}

// Telemetry says where the host serves its metrics (/metrics) and health
// endpoints (/healthz, /readyz), and where it exports traces. The
// standard OTEL_* environment variables win over Traces
// (docs/telemetry.md).
type Telemetry struct {
	// HTTP is the listen address of the metrics and health endpoints,
	// such as "127.0.0.1:9464"; a missing host (":9464") means loopback.
	// Default "": not served.
	HTTP string `yaml:"http,omitempty" json:"http,omitempty" reload:"restart"`
	// Traces configures the OTLP export of traces. Default: none (unless
	// OTEL_EXPORTER_OTLP_ENDPOINT is set).
	Traces Traces `yaml:"traces,omitempty" json:"traces,omitempty"`
}

// Control says where a running host serves its control API and web
// console (docs/control.md). Every field takes a restart to change.
type Control struct {
	// HTTP is the listen address, such as "127.0.0.1:9470"; a missing
	// host (":9470") means loopback. An address beyond loopback needs
	// TLS and a token key. Default "": not served.
	HTTP string `yaml:"http,omitempty" json:"http,omitempty" reload:"restart"`
	// CertFile and KeyFile are the server's TLS certificate and key (PEM).
	// Default none: plain HTTP, loopback only.
	CertFile string `yaml:"cert_file,omitempty" json:"cert_file,omitempty" reload:"restart"`
	KeyFile  string `yaml:"key_file,omitempty" json:"key_file,omitempty" reload:"restart"`
	// TokenSecretKey and TokenPublicKey verify the JWTs requests carry
	// (Authorization: Bearer), as the embedded broker verifies them:
	// "file:PATH" or "env:VAR" (base64 for a secret key). At most one.
	// Default none: no token asked for, loopback only.
	TokenSecretKey string `yaml:"token_secret_key,omitempty" json:"token_secret_key,omitempty" reload:"restart"`
	TokenPublicKey string `yaml:"token_public_key,omitempty" json:"token_public_key,omitempty" reload:"restart"`
	// ReadOnly refuses every change through the API (reload, pause,
	// resume); looking and the tap stay. Default false: changes are
	// allowed where the file can be written.
	ReadOnly bool `yaml:"read_only,omitempty" json:"read_only,omitempty" reload:"restart"`
}

// Traces configures the OTLP export of traces, as the OTEL_* variable
// named on each field would.
type Traces struct {
	// Endpoint is the OTLP base URL (OTEL_EXPORTER_OTLP_ENDPOINT), such as
	// "http://collector:4317". Default "": traces are off.
	Endpoint string `yaml:"endpoint,omitempty" json:"endpoint,omitempty" reload:"restart"`
	// Protocol is "grpc" or "http/protobuf" (OTEL_EXPORTER_OTLP_PROTOCOL).
	// Default "grpc".
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty" reload:"restart"`
	// Headers are sent with every export (OTEL_EXPORTER_OTLP_HEADERS).
	// Default none.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty" reload:"restart"`
	// ServiceName is the resource's service.name (OTEL_SERVICE_NAME).
	// Default "streamrun".
	ServiceName string `yaml:"service_name,omitempty" json:"service_name,omitempty" reload:"restart"`
	// ResourceAttributes are added to the resource
	// (OTEL_RESOURCE_ATTRIBUTES). Default none.
	ResourceAttributes map[string]string `yaml:"resource_attributes,omitempty" json:"resource_attributes,omitempty" reload:"restart"`
	// Sampler is always_on, always_off, traceidratio,
	// parentbased_always_on, parentbased_always_off or
	// parentbased_traceidratio (OTEL_TRACES_SAMPLER). Default
	// parentbased_always_on.
	Sampler string `yaml:"sampler,omitempty" json:"sampler,omitempty" reload:"restart"`
	// SamplerArg is the sampler's argument, the ratio from 0 to 1 for the
	// traceidratio samplers (OTEL_TRACES_SAMPLER_ARG). Default "1".
	SamplerArg string `yaml:"sampler_arg,omitempty" json:"sampler_arg,omitempty" reload:"restart"`
}

// Pipeline is one source -> steps and handler -> outputs flow.
type Pipeline struct {
	// Name identifies the pipeline in logs, metrics and health, and is
	// told to the handler. Required; letters, digits, '-', '_' and '.';
	// unique in a file.
	Name string `yaml:"name" json:"name" reload:"identity"`
	// Source is the subscription the pipeline reads.
	Source Source `yaml:"source" json:"source"`
	// Handler processes the messages, and says how they are batched. A
	// pipeline with Steps may have none: its steps alone run, in the
	// host's process (Handler then holds only the batching fields).
	Handler Handler `yaml:"handler,omitempty" json:"handler,omitempty"`
	// Steps are filters, maps, routes and dead-letter rules, each an
	// expression evaluated in the host's process, before the handler
	// and, after the entry "handler", on its outputs (see Step). Default
	// none.
	Steps []Step `yaml:"steps,omitempty" json:"steps,omitempty" reload:"flow"`
	// Outputs lists the topics the handler publishes to. Their producers
	// are opened before the first message is read, so a topic that cannot
	// be published to stops the pipeline at start rather than at its
	// first output. Outputs to other topics are published too (their
	// producer opens on first use). Default: none listed.
	Outputs []string `yaml:"outputs,omitempty" json:"outputs,omitempty" reload:"flow"`
	// ErrorPolicy says what becomes of messages that fail.
	ErrorPolicy ErrorPolicy `yaml:"error_policy,omitempty" json:"error_policy,omitempty"`
	// State keeps a value per message key for the handler, held by the
	// host and written to a changelog topic (docs/pipelines.md, "Keyed
	// state").
	State State `yaml:"state,omitempty" json:"state,omitempty"`
	// Window groups each key's messages into windows of time that the
	// handler gets whole, once each closes (docs/pipelines.md,
	// "Windows"). Default: none.
	Window Window `yaml:"window,omitempty" json:"window,omitempty"`
	// Paused keeps the pipeline from taking messages while its consumer,
	// subscription and instances stay: what the broker sent ahead waits
	// in the consumer's queue, the rest at the broker. The control API's
	// pause and resume set it in the file. Default false.
	Paused bool `yaml:"paused,omitempty" json:"paused,omitempty" reload:"flow"`
	// Tap allows the control API's tap to stream a sample of the
	// pipeline's inputs and outputs, payloads included (truncated).
	// Default false: a tap of the pipeline is refused.
	Tap bool `yaml:"tap,omitempty" json:"tap,omitempty" reload:"flow"`
	// Guarantee is what the pipeline promises about its effects in
	// Pulsar: at_least_once (every output published and every input
	// acknowledged once its outputs have their receipts; a crash may
	// publish an output twice) or exactly_once (the outputs, dead
	// letters and input acknowledgements of each CommitInterval commit
	// together in one Pulsar transaction; needs a broker with
	// transactions on).
	Guarantee Guarantee `yaml:"guarantee,omitempty" json:"guarantee,omitempty" default:"at_least_once" reload:"source"`
	// CommitInterval is how often an exactly_once pipeline commits its
	// transaction: a longer one costs fewer commits, a shorter one
	// delivers outputs sooner. Only with guarantee exactly_once. Default
	// 100ms there.
	CommitInterval time.Duration `yaml:"commit_interval,omitempty" json:"commit_interval,omitempty" reload:"source"`
	// TransactionTimeout is how long the broker keeps an exactly_once
	// pipeline's transaction open before aborting it: how soon the
	// messages of a host that died come again. Only with guarantee
	// exactly_once; more than CommitInterval. Default 10s there.
	TransactionTimeout time.Duration `yaml:"transaction_timeout,omitempty" json:"transaction_timeout,omitempty" reload:"source"`
}

// State is a pipeline's keyed state: a value per message key that the
// handler reads and changes while it handles the key's messages
// (plugin.State), kept by the host, changed only with an acknowledged
// message, written to a changelog topic before that message is
// acknowledged and read back from it when the pipeline starts.
type State struct {
	// Enabled turns keyed state on. Default false.
	Enabled bool `yaml:"enabled,omitempty" json:"enabled,omitempty" reload:"source"`
	// Changelog is the topic every change is written to, one message a
	// change (the key's new value as payload; an empty payload removes
	// it), meant to be compacted. Default "<subscription>-state" in the
	// namespace of the source's first topic (or its pattern's).
	Changelog string `yaml:"changelog,omitempty" json:"changelog,omitempty" reload:"source"`
	// TTL, when set, forgets a key whose value was last changed longer
	// ago: the handler sees no value for it. Default 0: values are kept
	// until deleted.
	TTL time.Duration `yaml:"ttl,omitempty" json:"ttl,omitempty" reload:"source"`
	// CacheBytes bounds the memory, in bytes, the host holds the
	// state's values in (keys and values, and 160 bytes a key for the
	// host's bookkeeping); past it, values go to a file under the host's
	// state directory and are read from there when their keys come.
	// The changelog stays the source of truth: the file is rebuilt from
	// it at every start. Default 536870912 (512 MiB: about 1 970 000
	// keys of 100-byte values in memory).
	CacheBytes int `yaml:"cache_bytes,omitempty" json:"cache_bytes,omitempty" reload:"source"`
}

// ChangelogTopic is the changelog topic of p's state: State.Changelog or
// its default.
func (p *Pipeline) ChangelogTopic() string {
	if t := p.State.Changelog; t != "" {
		return t
	}
	ns := "persistent://public/default"
	first := p.Source.Pattern
	if len(p.Source.Topics) > 0 {
		first = p.Source.Topics[0]
	}
	if t, err := pulsarwire.ParseTopic(first); err == nil && p.Source.Pattern == "" && first != "" {
		ns = "persistent://" + t.Tenant + "/" + t.Namespace
	} else if rest, ok := strings.CutPrefix(first, "persistent://"); ok {
		if parts := strings.SplitN(rest, "/", 3); len(parts) == 3 {
			ns = "persistent://" + parts[0] + "/" + parts[1]
		}
	}
	return ns + "/" + p.Source.Subscription + "-state"
}

// Guarantee is what a pipeline promises about its effects.
type Guarantee string

// Guarantees.
const (
	// AtLeastOnce: every message's outputs are published before it is
	// acknowledged; a failure between the two publishes them again. The
	// default.
	AtLeastOnce Guarantee = "at_least_once"
	// ExactlyOnce: outputs and acknowledgements commit together in
	// Pulsar transactions; a failure aborts them and the messages come
	// again.
	ExactlyOnce Guarantee = "exactly_once"
)

// Defaults of an exactly_once pipeline.
const (
	DefaultCommitInterval     = 100 * time.Millisecond
	DefaultTransactionTimeout = 10 * time.Second
)

// DefaultStateCacheBytes is State.CacheBytes' default: 512 MiB.
const DefaultStateCacheBytes = 512 << 20

// SubscriptionType is how the consumers of a subscription share it: the
// one definition, pulsarwire.SubscriptionType (subscribe.Type too). A file
// writes it in any case, with '_', '-', a space or nothing between words:
// "Key_Shared" and "keyshared" are KeyShared.
type SubscriptionType = pulsarwire.SubscriptionType

// Subscription types.
const (
	// Shared: each message to one consumer; order not kept. The default.
	Shared = pulsarwire.Shared
	// Exclusive: one consumer; order kept.
	Exclusive = pulsarwire.Exclusive
	// Failover: one active consumer, the others stand by; order kept.
	Failover = pulsarwire.Failover
	// KeyShared: each key to one consumer; order kept per key.
	KeyShared = pulsarwire.KeyShared
)

// InitialPosition is where a subscription that does not exist yet starts.
type InitialPosition string

// Initial positions.
const (
	// Latest: after the newest message. The default.
	Latest InitialPosition = "latest"
	// Earliest: at the oldest message kept.
	Earliest InitialPosition = "earliest"
)

// Source is the subscription a pipeline reads (docs/contract.md §4).
type Source struct {
	// Topics to read, as one stream: full names
	// (persistent://tenant/ns/name) or short ones ("orders" is
	// persistent://public/default/orders). Exactly one of Topics and
	// Pattern is required.
	Topics []string `yaml:"topics,omitempty" json:"topics,omitempty" reload:"source"`
	// Pattern is a regular expression (Go syntax) matched against whole
	// topic names of one namespace, whose tenant and namespace are
	// written literally: "persistent://shop/orders/.*-eu". Topics created
	// later join within 30 s.
	Pattern string `yaml:"pattern,omitempty" json:"pattern,omitempty" reload:"source"`
	// Subscription is the subscription's name. Required.
	Subscription string `yaml:"subscription" json:"subscription" reload:"source"`
	// Type of the subscription.
	Type SubscriptionType `yaml:"type,omitempty" json:"type,omitempty" default:"shared" reload:"source"`
	// InitialPosition of a new subscription.
	InitialPosition InitialPosition `yaml:"initial_position,omitempty" json:"initial_position,omitempty" default:"latest" reload:"source"`
	// Rewind moves the subscription's cursor at every start: "earliest",
	// "latest", a message id "ledger:entry:partition[:batch]" (one topic
	// only) or an RFC 3339 time. Default "": no rewind.
	Rewind string `yaml:"rewind,omitempty" json:"rewind,omitempty" reload:"source"`
	// ReceiverQueue is how many messages the broker may send ahead per
	// topic or partition (flow permits).
	ReceiverQueue int `yaml:"receiver_queue,omitempty" json:"receiver_queue,omitempty" default:"1000" reload:"source"`
}

// Handler says what processes a pipeline's messages and how they are
// batched for it.
type Handler struct {
	// Plugin is the path of a handler plugin binary (built with package
	// plugin's Serve). Exactly one of Plugin, Package and Script is
	// required. A relative path starts at the pipeline file's directory.
	Plugin string `yaml:"plugin,omitempty" json:"plugin,omitempty" reload:"handler"`
	// Package is a Go package that the host builds with "go build" at
	// start and runs as the plugin: a directory starting with ./ or ../
	// (from the pipeline file's directory) or an import path. The binary
	// is cached by the content of its sources, so a second start does not
	// rebuild and a changed source builds anew.
	Package string `yaml:"package,omitempty" json:"package,omitempty" reload:"handler"`
	// Script is a Python handler script, run with Python. A relative path
	// starts at the pipeline file's directory.
	Script string `yaml:"script,omitempty" json:"script,omitempty" reload:"handler"`
	// Python runs Script: an interpreter (a path, or a command looked up
	// in PATH) or a virtual environment's directory (its bin/python).
	// Only with Script. Default "python3".
	Python string `yaml:"python,omitempty" json:"python,omitempty" reload:"handler"`
	// SHA256 pins the handler's file: the hex SHA-256 of the plugin
	// binary or the script. The host hashes the file before every start
	// and restart of an instance and refuses to run it when the digest
	// differs (`sha256sum FILE` prints it). Not with Package, whose binary
	// is built at start. Default "": not checked.
	SHA256 string `yaml:"sha256,omitempty" json:"sha256,omitempty" reload:"handler"`
	// Args are given to the plugin binary. Default none.
	Args []string `yaml:"args,omitempty" json:"args,omitempty" reload:"handler"`
	// Env is added to the plugin's environment (over the host's).
	// Default none.
	Env map[string]string `yaml:"env,omitempty" json:"env,omitempty" reload:"handler"`
	// Config is handed to the handler at start, as JSON. Default none.
	Config map[string]any `yaml:"config,omitempty" json:"config,omitempty" reload:"handler"`
	// BatchSize is the most messages in one batch.
	BatchSize int `yaml:"batch_size,omitempty" json:"batch_size,omitempty" default:"100" reload:"flow"`
	// BatchWait is the longest the first message of a batch waits for
	// the batch to fill.
	BatchWait time.Duration `yaml:"batch_wait,omitempty" json:"batch_wait,omitempty" default:"10ms" reload:"flow"`
	// Instances is how many plugin processes run the handler side by
	// side.
	Instances int `yaml:"instances,omitempty" json:"instances,omitempty" default:"1" reload:"flow"`
	// Timeout bounds the handler's work on one batch; a handler that
	// takes longer is taken for hung: its process is killed and the batch
	// retried on a fresh one.
	Timeout time.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty" default:"30s" reload:"flow"`
	// MaxInFlight bounds the messages the host holds for the pipeline:
	// received and not yet settled (acknowledged, handed back for retry
	// or dead-lettered), whether waiting for a batch, in the handler or
	// waiting for their outputs' receipts. While it is reached the host
	// reads no more, so the broker's permits run out and a slow handler
	// slows consumption. Default max(4 × BatchSize × Instances, 1000).
	MaxInFlight int `yaml:"max_in_flight,omitempty" json:"max_in_flight,omitempty" reload:"flow"`
	// MaxBatchesInFlight is how many batches one instance works on at
	// once: the next batches go to the instance while the last is still in
	// it, so that host and plugin process do not wait for each other. The
	// outputs are still published in the order the batches were sent.
	// Default 8 on Shared subscriptions for a plugin: its round trip (a
	// write and a wake-up each way) costs more than a fast handler's work
	// on a batch, and with batches queued behind the one at work the
	// plugin takes the next as soon as it has answered instead of waiting
	// for the host; MaxInFlight still bounds the messages held (4 batches
	// of 1000 by default). A handler run in the host's process
	// (runtime.Options.LocalHandlers) has no round trip to hide and gets
	// 2 (DefaultLocalBatchesInFlight): more would only bunch its calls and
	// leave the receive loop without credits. Past 2 at once, an instance
	// gets more only while its last call took under a quarter of Timeout
	// (a batch's Timeout runs from its send, its wait behind the others
	// included), so a slow handler has 2 and is not taken for hung because
	// batches queued for it. Default 1 on
	// Exclusive, Failover and KeyShared, where each key's order must hold;
	// more than 1 on those is an error. With keyed state (at least once,
	// no steps before the handler) the host sends the next batch while the
	// last is out when the two share no key, which keeps each key's order
	// (docs/pipelines.md, "Keyed state"); with windows (at least once, no
	// steps before the handler) likewise, since a window has one call out
	// at a time (docs/pipelines.md, "Windows").
	MaxBatchesInFlight int `yaml:"max_batches_in_flight,omitempty" json:"max_batches_in_flight,omitempty" reload:"flow"`
}

// ErrorPolicy says what becomes of messages that fail.
type ErrorPolicy struct {
	// MaxRetries is how many times a message the handler asked to retry
	// is delivered again; the retry after that sends it to the
	// dead-letter topic instead. Default 0: no limit (Apache Pulsar's
	// default without a dead-letter policy).
	MaxRetries int `yaml:"max_retries,omitempty" json:"max_retries,omitempty" reload:"flow"`
	// Backoff is the redelivery delay of a retry for which the handler
	// gave none.
	Backoff Backoff `yaml:"backoff,omitempty" json:"backoff,omitempty"`
	// DeadLetterTopic receives dead-lettered messages, with the reason in
	// a property. Default "<topic>-<subscription>-DLQ", the topic being
	// the one the message came from (a partitioned topic's own name), as
	// the Java and Go clients name it.
	DeadLetterTopic string `yaml:"dead_letter_topic,omitempty" json:"dead_letter_topic,omitempty" reload:"flow"`
	// MaxCrashes is how many times a message may crash the handler (a
	// panic while handling it, or a batch that fails without naming a
	// message, see package runtime) before it is dead-lettered.
	MaxCrashes int `yaml:"max_crashes,omitempty" json:"max_crashes,omitempty" default:"3" reload:"flow"`
}

// Backoff is a delay that doubles with each attempt: Initial, 2×Initial,
// 4×Initial, ..., at most Max.
type Backoff struct {
	// Initial delay.
	Initial time.Duration `yaml:"initial,omitempty" json:"initial,omitempty" default:"1s" reload:"flow"`
	// Max delay.
	Max time.Duration `yaml:"max,omitempty" json:"max,omitempty" default:"1m" reload:"flow"`
}

// Delay is the delay before attempt n (n >= 1): Initial × 2^(n-1), at
// most Max. Zero fields take the defaults.
func (b Backoff) Delay(n int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Defaults computed from other fields, as documented on the fields (the
// plain ones are the fields' default tags).
const (
	// DefaultMinInFlight is the least of Handler.MaxInFlight's default.
	DefaultMinInFlight = 1000
	// DefaultSharedBatchesInFlight is Handler.MaxBatchesInFlight's default
	// on a Shared subscription (1 on the others);
	// DefaultLocalBatchesInFlight its default there for a handler run in
	// the host's process, or for steps alone.
	DefaultSharedBatchesInFlight = 8
	DefaultLocalBatchesInFlight  = 2
	// DefaultPython runs a Script when Handler.Python is "".
	DefaultPython = "python3"
)

// PythonCommand is the interpreter that runs h.Script: h.Python, the
// bin/python of a virtual environment when h.Python is a directory, or
// DefaultPython.
func (h Handler) PythonCommand() string {
	if h.Python == "" {
		return DefaultPython
	}
	if fi, err := os.Stat(h.Python); err == nil && fi.IsDir() {
		return VenvPython(h.Python)
	}
	return h.Python
}

// WithDefaults returns p with every zero field that has a default set to
// it: the plain defaults its fields declare, then the computed ones. The
// dead-letter topic stays "" (it depends on each message's topic), and so
// does Handler.Python (see PythonCommand). The handler is taken to run as
// a plugin process (see InProcess).
func (p Pipeline) WithDefaults() Pipeline { return p.withDefaults(false) }

// InProcess is WithDefaults for a pipeline whose handler runs in the
// host's process (runtime.Options.LocalHandlers): with no round trip to
// hide, a Shared subscription's instance takes DefaultLocalBatchesInFlight
// batches at once unless MaxBatchesInFlight says otherwise. A pipeline of
// steps alone is in the host's process with either.
func (p Pipeline) InProcess() Pipeline { return p.withDefaults(true) }

func (p Pipeline) withDefaults(inProcess bool) Pipeline {
	s, h := &p.Source, &p.Handler
	depthSet := h.MaxBatchesInFlight != 0
	if t, ok := s.Type.Canonical(); ok {
		s.Type = t
	}
	if ip, ok := s.InitialPosition.normal(); ok {
		s.InitialPosition = ip
	}
	if g, ok := p.Guarantee.normal(); ok {
		p.Guarantee = g
	}
	setDefaults(reflect.ValueOf(&p).Elem(), PipelineFields())
	if h.MaxInFlight == 0 {
		h.MaxInFlight = max(4*h.BatchSize*h.Instances, DefaultMinInFlight)
	}
	if w := &p.Window; w.Type != "" {
		w.Type = WindowType(strings.ToLower(string(w.Type)))
		w.Time = WindowTime(strings.ToLower(string(w.Time)))
		if w.IdleTimeout == 0 {
			w.IdleTimeout = DefaultWindowIdleTimeout
		}
		if w.Time == "" {
			w.Time = TimeEvent
		}
	}
	if p.State.Enabled && p.State.CacheBytes == 0 {
		p.State.CacheBytes = DefaultStateCacheBytes
	}
	if p.Guarantee == ExactlyOnce {
		if p.CommitInterval == 0 {
			p.CommitInterval = DefaultCommitInterval
		}
		if p.TransactionTimeout == 0 {
			p.TransactionTimeout = DefaultTransactionTimeout
		}
	}
	if !depthSet {
		switch {
		case s.Type.KeepsOrder():
			h.MaxBatchesInFlight = 1
		case inProcess || !p.HasHandler():
			h.MaxBatchesInFlight = DefaultLocalBatchesInFlight
		default:
			h.MaxBatchesInFlight = DefaultSharedBatchesInFlight
		}
	}
	e := &p.ErrorPolicy
	e.Backoff = e.Backoff.withDefaults()
	return p
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial < 0 {
		b.Initial = 0
	}
	if b.Max < 0 {
		b.Max = 0
	}
	setDefaults(reflect.ValueOf(&b).Elem(), declared(reflect.TypeFor[Backoff](), "", nil, ""))
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}
