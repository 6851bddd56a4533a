package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/clientrun"
	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/clienttrace"
)

// consumeFlags are the flags of `streamrun consume`.
type consumeFlags struct {
	clientFlags
	logFlags
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
	idleTimeout   time.Duration
	quiet         bool
}

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("consume", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun consume", pflag.ContinueOnError)
	var f consumeFlags
	f.clientFlags.register(fs)
	f.logFlags.register(fs, "also log connections, lookups and reconnections")
	fs.StringArrayVarP(&f.topics, "topic", "t", nil, "topic to consume (repeatable): name, tenant/ns/name or persistent://tenant/ns/name")
	fs.StringVar(&f.pattern, "pattern", "", `regular expression over full topic names of one namespace, e.g. "persistent://public/default/orders-.*" (instead of --topic)`)
	fs.StringVarP(&f.subscription, "subscription", "s", "", "subscription name (required)")
	fs.StringVar(&f.typ, "type", "shared", "subscription type: shared, exclusive, failover or key_shared")
	fs.StringVar(&f.position, "position", "", "move the subscription's cursor before consuming: earliest, latest, ledger:entry:partition[:batch] or an RFC 3339 time (default: where the subscription is; a new one starts at the newest message)")
	fs.IntVarP(&f.count, "count", "n", 0, "stop after this many messages (0: until interrupted)")
	fs.StringVarP(&f.output, "output", "o", "text", "text or json: one line per message with its id, key, properties and payload")
	fs.IntVar(&f.receiverQueue, "receiver-queue", subscribe.DefaultReceiverQueue, "messages the broker may send ahead")
	fs.BoolVar(&f.noAck, "no-ack", false, "do not acknowledge what is printed (it is delivered again to the subscription)")
	fs.DurationVar(&f.closeTimeout, "close-timeout", 30*time.Second, "how long closing may take at the end")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 0, "stop once no message came for this long, since subscribing or the last message (0: never)")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, `no "subscribed" line and no summary on stderr: only messages, and errors`)
	if code, done := cmd.parse(fs, args, helpText("consume")); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return cmd.fail(err)
	}
	o, err := f.options(stderr)
	if err != nil {
		return cmd.fail(err)
	}
	return consume(ctx, cmd, f, o)
}

// options turns the flags into what clientrun.Consume takes and checks
// them (clientrun.ConsumeOptions.Check); its errors are usage errors.
func (f *consumeFlags) options(stderr io.Writer) (clientrun.ConsumeOptions, error) {
	var o clientrun.ConsumeOptions
	switch {
	case len(f.topics) == 0 && f.pattern == "":
		return o, usagef("give --topic (repeatable) or --pattern")
	case f.receiverQueue < 1: // 0 is the library's default, not a queue
		return o, usagef("--receiver-queue must be at least 1, got %d", f.receiverQueue)
	case f.output != "text" && f.output != "json":
		return o, usagef("--output %q: want text or json", f.output)
	}
	typ, err := subscribe.ParseType(f.typ)
	if err != nil {
		return o, usagef("--type: %v", err)
	}
	o.Subscribe = subscribe.Options{
		Topics:        f.topics,
		Pattern:       f.pattern,
		Subscription:  f.subscription,
		Type:          typ,
		ReceiverQueue: f.receiverQueue,
	}
	if f.position != "" {
		if o.Subscribe.Rewind, err = subscribe.ParsePosition(f.position); err != nil {
			return o, usagef("--position: %v", err)
		}
		if strings.EqualFold(f.position, "earliest") {
			o.Subscribe.InitialPosition = subscribe.Earliest
		}
	}
	o.Each = subscribe.EachOptions{Count: int64(f.count), Idle: f.idleTimeout, NoAck: f.noAck}
	clientLog, notice, err := f.loggers(stderr)
	if err != nil {
		return o, err
	}
	o.Conn = f.conn(clientLog, notice, f.closeTimeout)
	return o, f.check(o)
}

func consume(ctx context.Context, cmd cmdIO, f consumeFlags, o clientrun.ConsumeOptions) int {
	notice, _ := f.logger(cmd.stderr, f.level())
	tr, err := clienttrace.Start(ctx, telemetry.Config{}, os.Getenv, notice)
	if err != nil {
		return cmd.fail(err)
	}
	defer tr.Shutdown(f.closeTimeout)
	w := msglines.NewWriter(cmd.stdout, f.output == "json")
	so := o.Subscribe
	o.Tracing = tr
	o.Subscribed = func(topics []string) {
		what := strings.Join(topics, ", ")
		if so.Pattern != "" {
			what = fmt.Sprintf("%s (pattern %s)", plural(int64(len(topics)), "topic"), so.Pattern)
		}
		if !f.quiet {
			notice.Info(fmt.Sprintf("subscribed to %s as %s (%s), waiting for messages", what, so.Subscription, so.Type.Name()),
				"subscription", so.Subscription, "type", so.Type.Name())
		}
	}
	r, err := clientrun.Consume(ctx, o, func(m *subscribe.Message) error {
		if err := w.Write(m); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	})
	if r != nil && !f.quiet {
		sum := consumeSummary{elapsed: r.Elapsed, n: r.N, last: r.Last}
		if r.Idle {
			sum.idle = f.idleTimeout
		}
		// After the line an interrupt prints, as the last word.
		defer fmt.Fprintln(cmd.stderr, sum.String())
	}
	switch {
	case err != nil && interrupted(ctx):
		return cmd.interrupted()
	case err != nil:
		return cmd.fail(err)
	}
	return exitOK
}

// consumeSummary is consume's closing line: count, rate, last id.
type consumeSummary struct {
	elapsed time.Duration // subscribed to stopped
	n       int64
	last    pulsarwire.MessageID
	idle    time.Duration // stopped after this long without a message
}

func (s consumeSummary) String() string {
	el := s.elapsed
	out := fmt.Sprintf("consumed %s in %s (%.0f msg/s)", plural(s.n, "message"), el.Round(time.Millisecond), float64(s.n)/max(el.Seconds(), 1e-9))
	if s.n > 0 {
		out += "; last message id " + s.last.String()
	}
	if s.idle > 0 {
		out += fmt.Sprintf("; stopped: no message for %s (--idle-timeout)", s.idle)
	}
	return out
}
