package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
)

// consumeFlags are the flags of `streamrun consume`.
type consumeFlags struct {
	clientFlags
	topics        []string
	pattern       string
	subscription  string
	typ           string
	position      string
	count         int
	output        string
	receiverQueue int
	noAck         bool
	closeTimeout  time.Duration
	verbose       bool
}

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("streamrun consume", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var f consumeFlags
	f.clientFlags.register(fs, `attempts for an operation the broker refuses "for now", such as subscribing to an Exclusive subscription in use (0: no limit, 5 s apart)`)
	fs.StringArrayVarP(&f.topics, "topic", "t", nil, "topic to consume (repeatable): name, tenant/ns/name or persistent://tenant/ns/name")
	fs.StringVar(&f.pattern, "pattern", "", `regular expression over full topic names of one namespace, e.g. "persistent://public/default/orders-.*" (instead of --topic)`)
	fs.StringVarP(&f.subscription, "subscription", "s", "", "subscription name (required)")
	fs.StringVar(&f.typ, "type", "shared", "subscription type: shared, exclusive, failover or key_shared")
	fs.StringVar(&f.position, "position", "", "move the subscription's cursor before consuming: earliest, latest, ledger:entry:partition[:batch] or an RFC 3339 time (default: where the subscription is; a new one starts at the newest message)")
	fs.IntVarP(&f.count, "count", "n", 0, "stop after this many messages (0: until interrupted)")
	fs.StringVarP(&f.output, "output", "o", "text", "text or json: one line per message with its id, key, properties and payload")
	fs.IntVar(&f.receiverQueue, "receiver-queue", subscribe.DefaultReceiverQueue, "messages the broker may send ahead")
	fs.BoolVar(&f.noAck, "no-ack", false, "do not acknowledge what is printed (it is delivered again to the subscription)")
	fs.DurationVar(&f.closeTimeout, "close-timeout", 30*time.Second, "how long connecting may take, and closing at the end")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log connections, retries and reconnections to stderr")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: streamrun consume (--topic TOPIC... | --pattern REGEXP) --subscription NAME [flags]\n\n"+
			"Receives messages and prints one line per message to stdout, acknowledging\n"+
			"each once printed. Works against the embedded broker (`streamrun broker`) and\n"+
			"Apache Pulsar alike; --url defaults to %s, where both listen\n"+
			"by default. Exit status: 0 done (--count reached, or interrupted), 1 failed,\n"+
			"2 bad flags.\n\nFlags:\n", pool.DefaultServiceURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "streamrun consume: %v\n", err)
		fs.Usage()
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamrun consume: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'streamrun consume --help' for the flags.")
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	po, so, err := f.options(stderr)
	if err != nil {
		return bad("%v", err)
	}
	return consume(ctx, f, po, so, stdout, stderr)
}

// options checks the flags and turns them into client and consumer
// options.
func (f *consumeFlags) options(stderr io.Writer) (pool.Options, subscribe.Options, error) {
	var po pool.Options
	var so subscribe.Options
	switch {
	case len(f.topics) == 0 && f.pattern == "":
		return po, so, errors.New("give --topic (repeatable) or --pattern")
	case len(f.topics) > 0 && f.pattern != "":
		return po, so, errors.New("--topic and --pattern exclude each other")
	case f.subscription == "":
		return po, so, errors.New("--subscription is required")
	case f.count < 0:
		return po, so, fmt.Errorf("--count must not be negative, got %d", f.count)
	case f.receiverQueue < 1:
		return po, so, fmt.Errorf("--receiver-queue must be at least 1, got %d", f.receiverQueue)
	case f.output != "text" && f.output != "json":
		return po, so, fmt.Errorf("--output %q: want text or json", f.output)
	}
	for _, t := range f.topics {
		if _, err := pulsarwire.ParseTopic(t); err != nil {
			return po, so, fmt.Errorf("--topic: %v", err)
		}
	}
	typ, err := subscribe.ParseType(f.typ)
	if err != nil {
		return po, so, fmt.Errorf("--type: %v", err)
	}
	so = subscribe.Options{
		Topics:        f.topics,
		Pattern:       f.pattern,
		Subscription:  f.subscription,
		Type:          typ,
		ReceiverQueue: f.receiverQueue,
	}
	if f.position != "" {
		p, err := subscribe.ParsePosition(f.position)
		if err != nil {
			return po, so, fmt.Errorf("--position: %v", err)
		}
		if _, isID := p.MessageID(); isID && (f.pattern != "" || len(f.topics) != 1) {
			return po, so, errors.New("--position with a message id needs exactly one --topic")
		}
		so.Rewind = p
		if strings.EqualFold(f.position, "earliest") {
			so.InitialPosition = subscribe.Earliest
		}
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	po, err = f.clientFlags.options()
	if err != nil {
		return po, so, err
	}
	po.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := so.Validate(); err != nil {
		return po, so, err
	}
	return po, so, nil
}

func consume(ctx context.Context, f consumeFlags, po pool.Options, so subscribe.Options, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "streamrun consume: %v\n", err)
		return 1
	}
	tr, _, err := startTracing(ctx, telemetry.Config{})
	if err != nil {
		return fail(err)
	}
	defer tr.shutdown(f.closeTimeout, stderr)
	cctx, cancel := context.WithTimeout(ctx, f.closeTimeout)
	c, err := pool.New(cctx, po)
	cancel()
	if err != nil {
		return fail(err)
	}
	closeAll := func(cons *subscribe.Consumer) {
		cctx, cancel := context.WithTimeout(context.Background(), f.closeTimeout)
		defer cancel()
		if cons != nil {
			cons.Close(cctx)
		}
		c.Close(cctx)
	}
	// Subscribing waits (an Exclusive subscription in use, a broker not
	// ready) under --retries, until interrupted.
	cons, err := subscribe.New(ctx, c, so)
	if err != nil {
		closeAll(nil)
		if ctx.Err() != nil {
			return 0
		}
		return fail(err)
	}
	defer closeAll(cons)

	w := newLineWriter(stdout, f.output)
	for n := 0; f.count == 0 || n < f.count; n++ {
		m, err := cons.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0 // interrupted
			}
			return fail(err)
		}
		if err := handleReceived(ctx, tr, cons, m, w, f.noAck); err != nil {
			return fail(err)
		}
	}
	return 0
}

// handleReceived prints m and acknowledges it, under its "process" span
// when traced.
func handleReceived(ctx context.Context, tr *commandTracing, cons *subscribe.Consumer, m *subscribe.Message, w *lineWriter, noAck bool) error {
	span := tr.process(m, cons.Subscription())
	if span != nil {
		defer span.End()
	}
	if err := w.write(m); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !noAck {
		if err := cons.Ack(ctx, m); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// lineWriter prints one line per message.
type lineWriter struct {
	w    io.Writer
	json bool
	buf  []byte
}

func newLineWriter(w io.Writer, format string) *lineWriter {
	return &lineWriter{w: w, json: format == "json"}
}

// jsonMessage is a message as --output json prints it. A payload that is
// not UTF-8 text is given in base64 as payload_base64 instead.
type jsonMessage struct {
	ID              string            `json:"id"`
	Topic           string            `json:"topic"`
	Key             string            `json:"key,omitempty"`
	OrderingKey     string            `json:"ordering_key,omitempty"`
	Properties      map[string]string `json:"properties,omitempty"`
	Payload         *string           `json:"payload,omitempty"`
	PayloadBase64   []byte            `json:"payload_base64,omitempty"`
	PublishTime     time.Time         `json:"publish_time"`
	EventTime       *time.Time        `json:"event_time,omitempty"`
	RedeliveryCount uint32            `json:"redelivery_count,omitempty"`
}

func (lw *lineWriter) write(m *subscribe.Message) error {
	if lw.json {
		jm := jsonMessage{
			ID: m.ID.String(), Topic: m.Topic, Key: m.Key, OrderingKey: m.OrderingKey,
			Properties: m.Properties, PublishTime: m.PublishTime, RedeliveryCount: m.RedeliveryCount,
		}
		if utf8.Valid(m.Payload) {
			s := string(m.Payload)
			jm.Payload = &s
		} else {
			jm.PayloadBase64 = m.Payload
		}
		if !m.EventTime.IsZero() {
			jm.EventTime = &m.EventTime
		}
		b, err := json.Marshal(jm)
		if err != nil {
			return err
		}
		_, err = lw.w.Write(append(b, '\n'))
		return err
	}
	// id key=... properties=k=v,... payload="..." (quoted, so that a line
	// is a message whatever its bytes).
	b := lw.buf[:0]
	b = append(b, m.ID.String()...)
	b = append(b, " key="...)
	b = strconv.AppendQuote(b, m.Key)
	if len(m.Properties) > 0 {
		b = append(b, " properties="...)
		for i, k := range slices.Sorted(maps.Keys(m.Properties)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, m.Properties[k]...)
		}
	}
	b = append(b, " payload="...)
	b = strconv.AppendQuote(b, string(m.Payload))
	b = append(b, '\n')
	lw.buf = b
	_, err := lw.w.Write(b)
	return err
}
