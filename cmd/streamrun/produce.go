package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/clientrun"
	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/telemetry"
	"github.com/streamrun/streamrun/telemetry/clienttrace"
)

// produceFlags are the flags of `streamrun produce`.
type produceFlags struct {
	clientFlags
	logFlags
	topic        string
	count        int
	size         int
	message      string
	key          string
	orderingKey  string
	properties   []string
	rate         float64
	compression  string
	noBatching   bool
	batchByKey   bool
	closeTimeout time.Duration
	quiet        bool
	input        string
	inputFormat  string
	keySep       string
}

func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("produce", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun produce", pflag.ContinueOnError)
	var f produceFlags
	f.clientFlags.register(fs)
	f.logFlags.register(fs, "also log connections and reconnections")
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to publish to (required): name, tenant/ns/name or persistent://tenant/ns/name")
	fs.IntVarP(&f.count, "count", "n", 1, "number of messages (with --input: at most this many lines; default: every line)")
	fs.IntVar(&f.size, "size", 0, "publish messages of this many bytes (instead of --message)")
	fs.StringVarP(&f.message, "message", "m", "", `message text; "{n}" in it becomes the message's number, from 0`)
	fs.StringVarP(&f.key, "key", "k", "", "partition key of every message")
	fs.StringVar(&f.orderingKey, "ordering-key", "", "ordering key of every message (KeyShared)")
	fs.StringArrayVarP(&f.properties, "property", "p", nil, "a property k=v of every message (repeatable)")
	fs.Float64VarP(&f.rate, "rate", "r", 0, "messages per second (0: as fast as the broker takes them)")
	fs.StringVar(&f.compression, "compression", "none", "compression of each batch: none, lz4, zlib, zstd or snappy")
	fs.BoolVar(&f.noBatching, "no-batching", false, "send every message as an entry of its own")
	fs.BoolVar(&f.batchByKey, "batch-by-key", false, "batch each key's messages (ordering key, else key) apart, for topics consumed with KeyShared")
	fs.DurationVar(&f.closeTimeout, "close-timeout", 30*time.Second, "how long to wait at the end (or after an interrupt) for outstanding receipts")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
	fs.StringVar(&f.input, "input", "", `publish each non-empty line of this file ("-": stdin) as a message, to its end (instead of --message or --size)`)
	fs.StringVar(&f.inputFormat, "input-format", "text", "--input's lines: text (each line the payload) or json (each line an object as consume --output json prints one)")
	fs.StringVar(&f.keySep, "input-key-separator", "", `text --input: split each line at the first occurrence of this: key before it, payload after (default "": no key)`)
	if code, done := cmd.parse(fs, args, helpText("produce")); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return cmd.fail(err)
	}
	o, err := f.options(fs, stderr)
	if err != nil {
		return cmd.fail(err)
	}
	return produce(ctx, cmd, f, o)
}

// options turns the flags into what clientrun.Produce takes and checks
// them (clientrun.ProduceOptions.Check first, then the flags that make
// the messages). Its errors are usage errors.
func (f *produceFlags) options(fs *pflag.FlagSet, stderr io.Writer) (clientrun.ProduceOptions, error) {
	o := clientrun.ProduceOptions{Topic: f.topic, Rate: f.rate}
	clientLog, notice, err := f.loggers(stderr)
	if err != nil {
		return o, err
	}
	o.Conn = f.conn(clientLog, notice, f.closeTimeout)
	o.Client.Producer.Batching = pool.BatchingOptions{Disabled: f.noBatching, ByKey: f.batchByKey}
	if err := f.check(o); err != nil {
		return o, err
	}
	if f.count < 1 {
		return o, usagef("--count must be at least 1, got %d", f.count)
	}
	if err := f.checkInput(fs.Changed); err != nil {
		return o, err
	}
	switch {
	case f.input != "":
	case fs.Changed("size") && fs.Changed("message"):
		return o, usagef("--size and --message exclude each other")
	case fs.Changed("size"):
		if f.size < 0 {
			return o, usagef("--size must not be negative, got %d", f.size)
		}
	case !fs.Changed("message"):
		return o, usagef("give --message TEXT, --size BYTES or --input FILE")
	}
	m := pool.Message{Key: f.key, OrderingKey: f.orderingKey}
	for _, p := range f.properties {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return o, usagef("--property %q: want key=value", p)
		}
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[k] = v
	}
	if o.Client.Producer.Compression, err = pool.ParseCompression(f.compression); err != nil {
		return o, usagef("--compression %q: want none, lz4, zlib, zstd or snappy", f.compression)
	}
	limit := 0 // with --input: every line, unless --count says otherwise
	if fs.Changed("count") {
		limit = f.count
	}
	o.Source = msglines.Source{Input: f.input, Limit: limit,
		Decoder:   msglines.Decoder{JSON: f.inputFormat == "json", KeySeparator: f.keySep, Template: m},
		Generated: msglines.Generated{Template: m, Text: f.message, Size: f.size, Count: f.count}}
	return o, nil
}

// loggers returns the client's logger (warnings; with -v its connection
// events too) and the command's own (retries, progress of waits).
func (l *logFlags) loggers(stderr io.Writer) (client, notice *slog.Logger, err error) {
	clientLevel := slog.LevelWarn
	if l.verbose {
		clientLevel = slog.LevelDebug
	}
	if client, err = l.logger(stderr, clientLevel); err != nil {
		return nil, nil, err
	}
	notice, err = l.logger(stderr, l.level())
	return client, notice, err
}

// sourceError is err of msglines.Source.Open, as a usage error naming
// the flag when a flag is the cause.
func (f *produceFlags) sourceError(err error) error {
	var big *msglines.TooLargeError
	var pe *os.PathError
	switch {
	case errors.As(err, &big):
		what := fmt.Sprintf("--size %d", big.Size)
		if f.message != "" {
			what = fmt.Sprintf("--message of %d bytes", big.Size)
		}
		return usagef("%s: the broker takes messages of up to %d bytes (its max_message_size), batched or not", what, big.Most)
	case errors.As(err, &pe):
		return usagef("--input: %v", err)
	}
	return err
}

func produce(ctx context.Context, cmd cmdIO, f produceFlags, o clientrun.ProduceOptions) int {
	stdout, stderr := cmd.stdout, cmd.stderr
	log, err := f.logger(stderr, f.level())
	if err != nil {
		return cmd.fail(err)
	}
	tr, err := clienttrace.Start(ctx, telemetry.Config{}, os.Getenv, log)
	if err != nil {
		return cmd.fail(err)
	}
	defer tr.Shutdown(f.closeTimeout)
	var prog *clientrun.ProgressLine
	o.Tracing = tr
	o.Opened = func(total int) { prog = clientrun.NewProgressLine(stderr, f.quiet, total) }
	o.Progress = func(r pool.PublishResult) { prog.Update(r) }
	res, err := clientrun.Produce(ctx, o)
	var se *clientrun.SourceError
	switch {
	case res == nil && interrupted(ctx):
		return cmd.fail(errors.New(interruptedMsg))
	case errors.As(err, &se):
		return cmd.fail(f.sourceError(se.Err))
	case res == nil:
		return cmd.fail(err)
	}
	prog.Finish(res.PublishResult)
	f.summary(stdout, res.PublishResult, res.Elapsed, res.Total)
	switch {
	case err != nil:
		return cmd.fail(fmt.Errorf("%w (%s published before it)", err, plural(res.Acked, "message")))
	case res.Failed > 0 && !res.Interrupted:
		return cmd.fail(fmt.Errorf("%s failed; the first: %w", plural(res.Failed, "message"), res.FirstErr))
	case res.Interrupted:
		return cmd.fail(fmt.Errorf("%s after %s were sent", interruptedMsg, plural(int64(res.Sent), "message")))
	case res.CloseErr != nil:
		return cmd.fail(res.CloseErr)
	}
	return exitOK
}

// summary writes the result line: how many of how many were produced,
// the rate, and the last message id.
func (f *produceFlags) summary(stdout io.Writer, r pool.PublishResult, elapsed time.Duration, total int) {
	n := r.Acked
	if n == int64(total) {
		fmt.Fprintf(stdout, "produced %s to %s", plural(n, "message"), f.topic)
	} else {
		fmt.Fprintf(stdout, "produced %d of %s to %s", n, plural(int64(total), "message"), f.topic)
	}
	if f.input != "" {
		name := f.input
		if name == "-" {
			name = "stdin"
		}
		fmt.Fprintf(stdout, " from the lines of %s", name)
	}
	fmt.Fprintf(stdout, " in %s (%.0f msg/s)", elapsed.Round(time.Millisecond), float64(n)/max(elapsed.Seconds(), 1e-9))
	if n > 0 {
		fmt.Fprintf(stdout, "; last message id %s", r.LastID)
	}
	fmt.Fprintln(stdout)
}
