package benchrun

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// SchemaVersion names the shape of Result. Fields are only ever added
// under it; a renamed or removed field gets a new version.
const SchemaVersion = "streamrun.bench/v1"

// Where a latency is measured from.
const (
	// LatencyFromSend: a producer's send call to its receipt.
	LatencyFromSend = "send"
	// LatencyFromPayload: the publish time written into the payload (see
	// Payload) to the message's arrival.
	LatencyFromPayload = "payload_timestamp"
	// LatencyFromPublishTime: the message's publish_time (milliseconds)
	// to its arrival, for payloads too short to carry a timestamp.
	LatencyFromPublishTime = "publish_time"
)

// Result is what one run measured, as `--output json` writes it. The
// field names are stable (see SchemaVersion and docs/benchmarks/bench-command.md).
type Result struct {
	Schema  string `json:"schema"`
	Command string `json:"command"` // produce, consume or pipeline
	// Messages and Bytes are what was measured: receipts (produce),
	// messages received (consume) or outputs received (pipeline).
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Sent is what this process published (0 when it published nothing).
	Sent int64 `json:"sent"`
	// Failed counts sends that failed.
	Failed         int64   `json:"failed"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	MsgPerSec      float64 `json:"msg_per_sec"`
	MiBPerSec      float64 `json:"mib_per_sec"`
	// SteadyMsgPerSec is the rate between the arrival of 10 % and of
	// 90 % of the messages measured: without the start (connecting, a
	// handler's warm-up) and the tail. 0 when too few arrived.
	SteadyMsgPerSec float64 `json:"steady_msg_per_sec"`
	// FirstMessageAt and LastMessageAt are when the first and the last
	// message measured arrived (zero when none did), for lining a run
	// up with what another process did.
	FirstMessageAt time.Time `json:"first_message_at"`
	LastMessageAt  time.Time `json:"last_message_at"`
	// LatencyFrom says where latencies start (the LatencyFrom constants).
	LatencyFrom string  `json:"latency_from"`
	Latency     Latency `json:"latency_ms"`
	// CPUSeconds is this process's user+system CPU time over the run
	// (getrusage); with the embedded broker in the process it includes
	// the broker's.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUMicrosPerMessage is CPUSeconds per message measured, in µs.
	CPUMicrosPerMessage float64 `json:"cpu_us_per_message"`
	// MaxRSSBytes is the process's peak resident set size.
	MaxRSSBytes int64 `json:"max_rss_bytes"`
	// HandlerRSSBytes is the resident set size of the handler plugin
	// processes together at the end (pipeline with plugins; 0 otherwise).
	HandlerRSSBytes int64 `json:"handler_rss_bytes"`
	// HandlerCPUSeconds is the handler plugin processes' user+system CPU
	// time together over the measured part (pipeline with plugins, from
	// /proc in 10 ms ticks; 0 otherwise): CPUSeconds leaves it out.
	HandlerCPUSeconds float64 `json:"handler_cpu_seconds"`
	// StateKeysChecked is the number of keys whose count the run read
	// back from the changelogs at the end and found equal to the messages
	// published with the key (pipeline with keyed state; 0 otherwise).
	StateKeysChecked int `json:"state_keys_checked,omitempty"`
	// SetupSeconds is the time from connected to measuring: opening
	// producers, subscribing (a pattern's discovery included), starting
	// the pipelines.
	SetupSeconds float64 `json:"setup_seconds"`
	// TopicsDeleted are the topics the run named itself and deleted at
	// the end (against an external broker, unless kept).
	TopicsDeleted []string   `json:"topics_deleted,omitempty"`
	Conditions    Conditions `json:"conditions"`
}

// Latency is a latency distribution, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// Conditions are what a run was measured under, read from the
// configuration actually used.
type Conditions struct {
	URL string `json:"url"`
	// Broker is "embedded" (started in this process) or "external"
	// (at URL); BrokerVersion is what the broker said in CONNECTED.
	Broker        string `json:"broker"`
	BrokerVersion string `json:"broker_version"`
	// BrokerDurability: for the embedded broker "memory", "write" (each
	// entry written before its receipt) or "fsync"; "" when external.
	BrokerDurability string `json:"broker_durability"`
	// Topic is the topic, or with Topics > 1 the prefix of TOPIC-0 to
	// TOPIC-(Topics-1).
	Topic       string `json:"topic"`
	OutputTopic string `json:"output_topic,omitempty"`
	Topics      int    `json:"topics"`
	// Pattern: the consumer subscribed to the topics by a pattern.
	Pattern bool `json:"pattern"`
	// Pipelines in the host (pipeline only).
	Pipelines   int     `json:"pipelines,omitempty"`
	Partitions  int     `json:"partitions"`
	MessageSize int     `json:"message_size"`
	Keys        int     `json:"keys"`
	Rate        float64 `json:"rate"`
	Count       int64   `json:"count"`
	// CountCap is the most messages the run would write, when it capped
	// a run against an external broker given neither a count nor a rate
	// (0: no cap).
	CountCap        int64    `json:"count_cap,omitempty"`
	DurationSeconds float64  `json:"duration_seconds"`
	Batching        Batching `json:"batching"`
	// MaxPending is the most messages published and not yet receipted
	// (--max-pending): at an unlimited rate it sets the produce latency.
	MaxPending       int      `json:"max_pending"`
	Subscription     string   `json:"subscription,omitempty"`
	SubscriptionType string   `json:"subscription_type,omitempty"`
	ReceiverQueue    int      `json:"receiver_queue,omitempty"`
	Handler          *Handler `json:"handler,omitempty"`

	GOMAXPROCS int    `json:"gomaxprocs"`
	NumCPU     int    `json:"num_cpu"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	Version    string `json:"streamrun_version"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute averages at the
	// start and at the end (empty where there is no /proc).
	LoadAverageStart []float64 `json:"load_average_start"`
	LoadAverageEnd   []float64 `json:"load_average_end"`
	StartedAt        time.Time `json:"started_at"`
}

// Batching is the producer's batching.
type Batching struct {
	Enabled     bool    `json:"enabled"`
	MaxMessages int     `json:"max_messages"`
	MaxBytes    int     `json:"max_bytes"`
	MaxDelayMs  float64 `json:"max_delay_ms"`
}

// Handler is the pipeline's handler.
type Handler struct {
	Kind    string `json:"kind"` // in-process, plugin or steps (no handler)
	Plugin  string `json:"plugin,omitempty"`
	Package string `json:"package,omitempty"`
	// Config is the handler's config, "{output}" standing for the
	// output topic (plugin and package handlers).
	Config    map[string]any `json:"config,omitempty"`
	BatchSize int            `json:"batch_size"`
	Instances int            `json:"instances"`
	// Guarantee is the pipeline's (at_least_once, exactly_once), with
	// its commit interval under exactly_once.
	Guarantee      string `json:"guarantee,omitempty"`
	CommitInterval string `json:"commit_interval,omitempty"`
	// OutputsPerInput is the outputs the handler made of each message
	// when more than one (HandlerOptions.Copies); messages, msg/s and
	// CPU a message count outputs.
	OutputsPerInput int `json:"outputs_per_input,omitempty"`
	// State: keyed state on, the identity handler counting each key's
	// messages in it (HandlerOptions.State).
	State bool `json:"state,omitempty"`
}

// WriteText writes the summary for people.
func (r *Result) WriteText(w io.Writer) error {
	c := &r.Conditions
	_, err := fmt.Fprintf(w, `%s: %d messages (%d bytes each) in %.3fs: %.0f msg/s, %.2f MiB/s, %d failed
latency (ms, from %s): p50 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (%d samples)
cpu: %.3fs (%.2f µs/msg, this process), max rss %.1f MiB, handler processes' rss %.1f MiB, setup %.3fs
broker: %s %s %s, topic %s (%d topic(s), %d partition(s) each); GOMAXPROCS %d, load %v -> %v
`,
		r.Command, r.Messages, c.MessageSize, r.ElapsedSeconds, r.MsgPerSec, r.MiBPerSec, r.Failed,
		r.LatencyFrom, r.Latency.P50, r.Latency.P99, r.Latency.P999, r.Latency.Max, r.Latency.Count,
		r.CPUSeconds, r.CPUMicrosPerMessage, float64(r.MaxRSSBytes)/(1<<20), float64(r.HandlerRSSBytes)/(1<<20), r.SetupSeconds,
		c.Broker, c.URL, c.BrokerVersion, c.Topic, c.Topics, c.Partitions, c.GOMAXPROCS, c.LoadAverageStart, c.LoadAverageEnd)
	if h := c.Handler; err == nil && h != nil && h.Guarantee != "" {
		_, err = fmt.Fprintf(w, "pipeline: %s handler, batches of %d, %d instance(s), %s", h.Kind, h.BatchSize, h.Instances, h.Guarantee)
		if err == nil && h.CommitInterval != "" {
			_, err = fmt.Fprintf(w, ", commit interval %s", h.CommitInterval)
		}
		if err == nil && r.HandlerCPUSeconds > 0 && r.Messages > 0 {
			_, err = fmt.Fprintf(w, ", handler processes' cpu %.3fs (%.2f µs/msg)", r.HandlerCPUSeconds, r.HandlerCPUSeconds*1e6/float64(r.Messages))
		}
		if err == nil && h.State {
			_, err = fmt.Fprintf(w, "; keyed state: a count per key, %d key(s) checked against the changelog", r.StateKeysChecked)
		}
		if err == nil {
			_, err = fmt.Fprintln(w)
		}
	}
	if err != nil || r.Sent == 0 && len(r.TopicsDeleted) == 0 {
		return err
	}
	_, err = fmt.Fprintln(w, r.wrote())
	return err
}

// wrote says what the run wrote and what it left: the messages, whether
// the cap stopped them, the topics deleted.
func (r *Result) wrote() string {
	c := &r.Conditions
	s := fmt.Sprintf("wrote: %d messages, %.1f MiB", r.Sent, float64(r.Sent)*float64(c.MessageSize)/(1<<20))
	if c.CountCap > 0 && r.Sent >= c.CountCap {
		s += fmt.Sprintf(", stopped at the cap of %d against --url (--count or --rate says how many; --rate 0: as fast as the broker takes them for --duration)", c.CountCap)
	}
	if len(r.TopicsDeleted) > 0 {
		s += fmt.Sprintf("; deleted at the end: %s (--keep-topic keeps them)", strings.Join(r.TopicsDeleted, ", "))
	}
	return s
}
