package benchrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/streamrun/streamrun/admin"
	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// Options are one bench run: where it runs, the load it puts on the
// broker and, for a pipeline, the handler. `streamrun bench` fills them
// from its flags, which check each value; the zero value of a number is
// "none" (no rate limit, no keys), not a default.
type Options struct {
	// ServiceURL is the broker to measure. Default "": an embedded broker
	// started in this process on free ports, its data in a temporary
	// directory that Close removes.
	ServiceURL string
	// Client gives the client options for the broker at serviceURL
	// (ServiceURL, or the embedded broker's). Required.
	Client func(serviceURL string) (pool.Options, error)
	// ConnectTimeout bounds connecting, retries included. Required.
	ConnectTimeout time.Duration
	// Memory keeps the embedded broker's messages in memory only; Sync
	// makes it fsync every message before its receipt. Default: each
	// entry written before its receipt.
	Memory, Sync bool
	// Admin is the admin API that creates partitioned topics (Partitions
	// > 1); with the embedded broker its URL is the broker's own.
	Admin admin.Options
	// Logger takes the embedded broker's and the pipeline host's
	// warnings. Default nil: discarded.
	Logger *slog.Logger
	// Version is streamrun's version, for the conditions.
	Version string

	// Topic is the topic, or with Topics or Pipelines > 1 the prefix of
	// TOPIC-0 to TOPIC-(N-1). Default "": a new one, bench-<time>.
	Topic string
	// Topics spreads the messages round-robin over this many topics.
	// Default 0: one.
	Topics int
	// Pattern subscribes to the topics by a pattern, TOPIC-[0-9]+.
	Pattern bool
	// Pipelines is the number of pipelines in the host, each from TOPIC-i
	// to TOPIC-i-out. Default 0: one.
	Pipelines int
	// Partitions of each new topic. Default 0: not partitioned.
	Partitions int
	// Size is each payload's size in bytes; a payload of 19 bytes or more
	// carries its publish time (Payload).
	Size int
	// Rate is messages per second. Default 0: as fast as receipts allow.
	Rate float64
	// Count is how many messages to publish; Duration how long, when
	// Count is 0. Default: for DefaultDuration.
	Count    int64
	Duration time.Duration
	// CountCap stops publishing after this many messages, whatever
	// Duration says; the conditions record it. Default 0: no cap.
	// (`streamrun bench` sets it against --url when given neither --count
	// nor --rate.)
	CountCap int64
	// Keys is the number of distinct keys, given round-robin. Default 0:
	// no key.
	Keys int
	// Producer is the producers' settings. With a KeyShared subscription
	// they batch by key, as a run does for a KeyShared pipeline.
	Producer pool.ProducerOptions

	// Subscription, Type and ReceiverQueue are the consumer's (consume,
	// pipeline).
	Subscription  string
	Type          subscribe.Type
	ReceiverQueue int
	// Earliest starts a new subscription at the earliest message
	// (consume). Default false: the latest.
	Earliest bool
	// Produce publishes the messages in this process (consume). Default
	// false: it receives what another process publishes.
	Produce bool

	// Handler is the pipeline's handler (pipeline).
	Handler HandlerOptions

	// Progress receives a progress line every ProgressEvery. Default nil
	// or 0: none.
	Progress      io.Writer
	ProgressEvery time.Duration
	// CloseTimeout bounds waiting for the last receipts and closing.
	// Required.
	CloseTimeout time.Duration
	// DrainTimeout bounds waiting for the last messages to arrive once
	// publishing ended (consume, pipeline). Required.
	DrainTimeout time.Duration
	// KeepTopics keeps, against ServiceURL, the topics Start named itself
	// (Run). Default false: Run deletes them at the end; an embedded
	// broker takes its topics with it anyway.
	KeepTopics bool
}

// DefaultDuration is how long a run publishes when given neither Count
// nor Duration.
const DefaultDuration = 10 * time.Second

// Run is one run of kind from start to end, as `streamrun bench` makes
// it: Start, the kind's measure, then, against ServiceURL unless
// KeepTopics, DeleteOwnTopics (Result.TopicsDeleted), then Close. It
// returns the result of the part that ran along with an error that cut
// it short (ctx ended, a send failed, a message missing).
func Run(ctx context.Context, kind Kind, o Options) (*Result, error) {
	if kind != KindProduce && kind != KindConsume && kind != KindPipeline {
		return nil, fmt.Errorf("benchrun: kind %q: want produce, consume or pipeline", kind)
	}
	b, err := Start(ctx, o)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var res *Result
	switch kind {
	case KindProduce:
		res, err = b.Produce(ctx)
	case KindConsume:
		res, err = b.Consume(ctx)
	default:
		res, err = b.Pipeline(ctx)
	}
	if o.ServiceURL != "" && !o.KeepTopics {
		deleted, derr := b.DeleteOwnTopics()
		err = errors.Join(err, derr)
		if res != nil {
			res.TopicsDeleted = deleted
		}
	}
	return res, err
}

// Bench is one run: the broker, the client, the conditions. Close ends
// it.
type Bench struct {
	o       Options
	cluster *broker.Cluster // the embedded broker, nil with ServiceURL
	dataDir string          // the embedded broker's, removed at the end
	client  *pool.Client
	cond    Conditions
	// ownTopics: Start named the topics (Topic was ""); writes: the run
	// publishes to them (not consume without Produce); outs are a
	// pipeline's output topics. DeleteOwnTopics deletes them.
	ownTopics, writes bool
	outs              []string
}

// Start starts the embedded broker unless o.ServiceURL is set, connects,
// and creates the topics.
func Start(ctx context.Context, o Options) (*Bench, error) {
	if o.Count == 0 && o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	b := &Bench{o: o}
	external := o.ServiceURL != ""
	if !external {
		if err := b.startEmbedded(ctx); err != nil {
			return nil, err
		}
		b.o.ServiceURL = b.cluster.ServiceURL()
	}
	opts, err := o.Client(b.o.ServiceURL)
	if err != nil {
		b.Close()
		return nil, err
	}
	opts.Producer = o.Producer
	if o.Type == subscribe.KeyShared {
		// As a run does for a KeyShared pipeline: the broker dispatches
		// an entry whole, by its first key.
		opts.Producer.Batching.ByKey = true
	}
	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	if b.client, err = pool.New(cctx, opts); err != nil {
		b.Close()
		return nil, fmt.Errorf("connect to %s: %w", b.o.ServiceURL, err)
	}
	if b.o.Topic == "" {
		b.ownTopics = true
		b.o.Topic = "persistent://public/default/bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	for _, t := range b.o.topicNames() {
		if err := b.createTopic(ctx, t); err != nil {
			b.Close()
			return nil, err
		}
	}
	b.conditions(ctx, external)
	return b, nil
}

// startEmbedded starts a broker in this process on free ports.
func (b *Bench) startEmbedded(ctx context.Context) error {
	log := b.o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := broker.Options{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Memory: b.o.Memory, Sync: b.o.Sync, Logger: log.With("embedded_broker", true),
		Transactions: b.o.Handler.ExactlyOnce}
	if !b.o.Memory {
		dir, err := os.MkdirTemp("", "streamrun-bench-")
		if err != nil {
			return fmt.Errorf("embedded broker: data directory: %w", err)
		}
		b.dataDir, opts.DataDir = dir, dir
	}
	c, err := broker.Start(ctx, opts)
	if err != nil {
		b.Close()
		return fmt.Errorf("embedded broker: %w", err)
	}
	b.cluster = c
	b.o.Admin.URL = c.AdminURL()
	return nil
}

// topicNames are the topics the run publishes to: Topic, or with Topics
// or Pipelines N > 1, TOPIC-0 to TOPIC-(N-1).
func (o *Options) topicNames() []string {
	n := max(o.Topics, o.Pipelines)
	if n <= 1 {
		return []string{o.Topic}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = o.Topic + "-" + strconv.Itoa(i)
	}
	return out
}

// createTopic creates topic with Partitions partitions, when more than
// one: unpartitioned topics are created on first use.
func (b *Bench) createTopic(ctx context.Context, topic string) error {
	if b.o.Partitions < 2 {
		return nil
	}
	a, err := b.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.CreateTopic(ctx, topic, b.o.Partitions); err != nil {
		return fmt.Errorf("create %s with %d partitions at --admin-url %s: %w", topic, b.o.Partitions, b.o.Admin.URL, err)
	}
	return nil
}

// admin is a client of the admin API.
func (b *Bench) admin() (*admin.Client, error) {
	ao := b.o.Admin
	if !strings.HasPrefix(ao.URL, "https://") {
		ao.CAFile = "" // the CA is for an admin API served over TLS
	}
	return admin.New(ao)
}

// conditions records what the run is measured under.
func (b *Bench) conditions(ctx context.Context, external bool) {
	o := &b.o
	c := &b.cond
	c.FillHost(o.Version)
	c.URL, c.Topic, c.Partitions = o.ServiceURL, o.Topic, max(o.Partitions, 1)
	c.Topics, c.Pattern, c.Pipelines = max(o.Topics, o.Pipelines, 1), o.Pattern, o.Pipelines
	c.MessageSize, c.Keys, c.Rate, c.Count, c.CountCap = o.Size, o.Keys, o.Rate, o.Count, o.CountCap
	c.DurationSeconds = o.Duration.Seconds()
	bo := o.Producer.Batching
	c.Batching = Batching{Enabled: !bo.Disabled, MaxMessages: bo.MaxMessages, MaxBytes: bo.MaxBytes, MaxDelayMs: float64(bo.MaxDelay) / float64(time.Millisecond)}
	c.MaxPending = o.Producer.MaxPendingMessages
	c.Broker = "embedded"
	switch {
	case external:
		c.Broker = "external"
	case o.Memory:
		c.BrokerDurability = "memory"
	case o.Sync:
		c.BrokerDurability = "fsync"
	default:
		c.BrokerDurability = "write"
	}
	if v, err := b.client.ServerVersion(ctx); err == nil {
		c.BrokerVersion = v
	}
}

// DeleteOwnTopics closes the client and deletes, through the admin API,
// the topics Start named itself (Options.Topic ""), a pipeline's outputs
// too, and returns those it deleted. It deletes nothing of a run that
// wrote nothing (consume without Produce), nor of a topic the caller
// named. A topic the admin API does not know (an output the handler never
// wrote to) is not an error. It takes at most CloseTimeout, whether or
// not the run was interrupted.
func (b *Bench) DeleteOwnTopics() ([]string, error) {
	b.closeClient()
	if !b.ownTopics || !b.writes {
		return nil, nil
	}
	a, err := b.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), b.o.CloseTimeout)
	defer cancel()
	var deleted []string
	var errs []error
	for _, t := range append(b.o.topicNames(), b.outs...) {
		var se *admin.StatusError
		switch _, err := a.DeleteTopic(ctx, t, true); {
		case err == nil:
			deleted = append(deleted, t)
		case errors.As(err, &se) && se.Status == http.StatusNotFound:
		default:
			errs = append(errs, fmt.Errorf("delete %s: %w", t, err))
		}
	}
	if len(errs) > 0 {
		return deleted, fmt.Errorf("the run's topics at %s: %w", b.o.Admin.URL, errors.Join(errs...))
	}
	return deleted, nil
}

// Close closes the client and stops the embedded broker, removing its
// data.
func (b *Bench) Close() {
	b.closeClient()
	if b.cluster != nil {
		b.cluster.Close()
		b.cluster = nil
	}
	if b.dataDir != "" {
		os.RemoveAll(b.dataDir)
		b.dataDir = ""
	}
}

// closeClient closes the client within CloseTimeout.
func (b *Bench) closeClient() {
	if b.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), b.o.CloseTimeout)
		b.client.Close(ctx)
		cancel()
		b.client = nil
	}
}

// sendErrors is an error when a send failed.
func (b *Bench) sendErrors(m *Meter, sent int64) error {
	if n, first := m.FailedCount(); n > 0 {
		return fmt.Errorf("%d of %d sends to %s failed; the first: %w", n, sent, b.o.Topic, first)
	}
	return nil
}

// closeConsumer closes cons within CloseTimeout.
func (b *Bench) closeConsumer(cons *subscribe.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), b.o.CloseTimeout)
	defer cancel()
	cons.Close(ctx)
}
