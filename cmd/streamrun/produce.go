package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
	"github.com/streamrun/streamrun/telemetry"
)

// produceFlags are the flags of `streamrun produce`.
type produceFlags struct {
	clientFlags
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
}

func runProduce(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("streamrun produce", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var f produceFlags
	f.clientFlags.register(fs, `attempts for an operation the broker refuses "for now" (0: no limit)`)
	fs.StringVarP(&f.topic, "topic", "t", "", "topic to publish to (required): name, tenant/ns/name or persistent://tenant/ns/name")
	fs.IntVarP(&f.count, "count", "n", 1, "number of messages")
	fs.IntVar(&f.size, "size", 0, "publish messages of this many bytes (instead of --message)")
	fs.StringVarP(&f.message, "message", "m", "", `message text; "{n}" in it becomes the message's number, from 0`)
	fs.StringVarP(&f.key, "key", "k", "", "partition key of every message")
	fs.StringVar(&f.orderingKey, "ordering-key", "", "ordering key of every message (KeyShared)")
	fs.StringArrayVarP(&f.properties, "property", "p", nil, "a property k=v of every message (repeatable)")
	fs.Float64Var(&f.rate, "rate", 0, "messages per second (0: as fast as the broker takes them)")
	fs.StringVar(&f.compression, "compression", "none", "compression of each batch: none, lz4, zlib, zstd or snappy")
	fs.BoolVar(&f.noBatching, "no-batching", false, "send every message as an entry of its own")
	fs.BoolVar(&f.batchByKey, "batch-by-key", false, "batch each key's messages (ordering key, else key) apart, for topics consumed with KeyShared")
	fs.DurationVar(&f.closeTimeout, "close-timeout", 30*time.Second, "how long to wait at the end (or after an interrupt) for outstanding receipts")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress line")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: streamrun produce --topic TOPIC (--message TEXT | --size BYTES) [flags]\n\n"+
			"Publishes messages and waits for every receipt. Works against the embedded\n"+
			"broker (`streamrun broker`) and Apache Pulsar alike; --url defaults to\n"+
			"%s, where both listen by default. A progress line goes to stderr;\n"+
			"the last message id and a summary go to stdout. Exit status: 0 all published,\n"+
			"1 some failed or the broker could not be reached, 2 bad flags.\n\nFlags:\n", pool.DefaultServiceURL)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "streamrun produce: %v\n", err)
		fs.Usage()
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "streamrun produce: "+format+"\n", a...)
		fmt.Fprintln(stderr, "Run 'streamrun produce --help' for the flags.")
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	opts, msg, err := f.options(fs)
	if err != nil {
		return bad("%v", err)
	}
	return produce(ctx, f, opts, msg, stdout, stderr)
}

// options checks the flags and turns them into client options and the
// message template.
func (f *produceFlags) options(fs *pflag.FlagSet) (pool.Options, pool.Message, error) {
	var o pool.Options
	var m pool.Message
	if f.topic == "" {
		return o, m, errors.New("--topic is required")
	}
	if _, err := pulsarwire.ParseTopic(f.topic); err != nil {
		return o, m, fmt.Errorf("--topic: %v", err)
	}
	if f.count < 1 {
		return o, m, fmt.Errorf("--count must be at least 1, got %d", f.count)
	}
	switch {
	case fs.Changed("size") && fs.Changed("message"):
		return o, m, errors.New("--size and --message exclude each other")
	case fs.Changed("size"):
		if f.size < 0 || f.size > pulsarwire.DefaultMaxMessageSize {
			return o, m, fmt.Errorf("--size must be between 0 and %d, got %d", pulsarwire.DefaultMaxMessageSize, f.size)
		}
	case !fs.Changed("message"):
		return o, m, errors.New("give --message TEXT or --size BYTES")
	}
	if f.rate < 0 {
		return o, m, fmt.Errorf("--rate must not be negative, got %v", f.rate)
	}
	m.Key, m.OrderingKey = f.key, f.orderingKey
	for _, p := range f.properties {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return o, m, fmt.Errorf("--property %q: want key=value", p)
		}
		if m.Properties == nil {
			m.Properties = map[string]string{}
		}
		m.Properties[k] = v
	}
	ct, ok := pb.CompressionType_value[strings.ToUpper(f.compression)]
	if !ok {
		return o, m, fmt.Errorf("--compression %q: want none, lz4, zlib, zstd or snappy", f.compression)
	}
	if f.noBatching && f.batchByKey {
		return o, m, errors.New("--batch-by-key and --no-batching exclude each other")
	}
	o, err := f.clientFlags.options()
	if err != nil {
		return o, m, err
	}
	o.Producer = pool.ProducerOptions{
		Compression: pb.CompressionType(ct),
		Batching:    pool.BatchingOptions{Disabled: f.noBatching, ByKey: f.batchByKey},
	}
	o.Logger = slog.New(slog.DiscardHandler)
	return o, m, nil
}

// payloadFor is the payload of message i.
func (f *produceFlags) payloadFor(i int, fixed []byte) []byte {
	if fixed != nil {
		return fixed
	}
	return []byte(strings.ReplaceAll(f.message, "{n}", strconv.Itoa(i)))
}

func produce(ctx context.Context, f produceFlags, opts pool.Options, tmpl pool.Message, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "streamrun produce: %v\n", err)
		return 1
	}
	tr, _, err := startTracing(ctx, telemetry.Config{})
	if err != nil {
		return fail(err)
	}
	defer tr.shutdown(f.closeTimeout, stderr)
	// Connecting gives up after the close timeout when the broker is not
	// there, rather than retrying for ever.
	cctx, cancel := context.WithTimeout(ctx, f.closeTimeout)
	c, err := pool.New(cctx, opts)
	cancel()
	if err != nil {
		return fail(err)
	}
	closeClient := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), f.closeTimeout)
		defer cancel()
		return c.Close(cctx)
	}
	p, err := c.Producer(ctx, f.topic)
	if err != nil {
		closeClient()
		return fail(err)
	}

	// The payload, unless "{n}" makes each message's its own.
	var fixed []byte
	switch {
	case f.size > 0 || f.message == "":
		fixed = make([]byte, f.size)
		for i := range fixed {
			fixed[i] = byte('a' + i%26)
		}
	case !strings.Contains(f.message, "{n}"):
		fixed = []byte(f.message)
	}

	var (
		acked, failed atomic.Int64
		mu            sync.Mutex
		lastID        pulsarwire.MessageID
		firstErr      error
		all           sync.WaitGroup
	)
	done := func(id pulsarwire.MessageID, err error) {
		if err != nil {
			failed.Add(1)
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		} else {
			acked.Add(1)
			mu.Lock()
			lastID = id
			mu.Unlock()
		}
		all.Done()
	}

	prog := newProgress(stderr, f.quiet, f.count)
	start := time.Now()
	sent := 0
	for ; sent < f.count && ctx.Err() == nil; sent++ {
		if f.rate > 0 {
			due := start.Add(time.Duration(float64(sent) / f.rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
				}
				if ctx.Err() != nil {
					break
				}
			}
		}
		m := tmpl
		m.Payload = f.payloadFor(sent, fixed)
		all.Add(1)
		m, mdone := tr.send(p.Topic(), m, done)
		p.SendAsync(ctx, m, mdone)
		prog.update(sent+1, acked.Load(), failed.Load())
	}
	interrupted := ctx.Err() != nil
	closeErr := closeClient() // flushes and waits for receipts
	all.Wait()
	elapsed := time.Since(start)
	prog.finish(sent, acked.Load(), failed.Load())

	mu.Lock()
	defer mu.Unlock()
	rate := float64(acked.Load()) / elapsed.Seconds()
	fmt.Fprintf(stdout, "produced %d of %d messages to %s in %s (%.0f msg/s)", acked.Load(), f.count, f.topic, elapsed.Round(time.Millisecond), rate)
	if acked.Load() > 0 {
		fmt.Fprintf(stdout, "; last message id %s", lastID)
	}
	fmt.Fprintln(stdout)
	switch {
	case failed.Load() > 0:
		return fail(fmt.Errorf("%d messages failed; the first: %w", failed.Load(), firstErr))
	case interrupted:
		return fail(fmt.Errorf("interrupted after %d messages", sent))
	case closeErr != nil:
		return fail(closeErr)
	}
	return 0
}

// progress writes a status line to stderr: rewritten in place on a
// terminal, once a second otherwise.
type progress struct {
	w       io.Writer
	quiet   bool
	tty     bool
	total   int
	start   time.Time
	last    time.Time
	every   time.Duration
	printed bool
}

func newProgress(w io.Writer, quiet bool, total int) *progress {
	p := &progress{w: w, quiet: quiet || total < 2, total: total, start: time.Now(), every: time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.every = true, 200*time.Millisecond
		}
	}
	p.last = p.start
	return p
}

func (p *progress) line(sent int, acked, failed int64) string {
	el := time.Since(p.start).Seconds()
	s := fmt.Sprintf("sent %d/%d, acknowledged %d (%.0f msg/s)", sent, p.total, acked, float64(acked)/max(el, 1e-9))
	if failed > 0 {
		s += fmt.Sprintf(", failed %d", failed)
	}
	return s
}

func (p *progress) update(sent int, acked, failed int64) {
	if p.quiet || time.Since(p.last) < p.every {
		return
	}
	p.last = time.Now()
	p.printed = true
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(sent, acked, failed))
	} else {
		fmt.Fprintln(p.w, p.line(sent, acked, failed))
	}
}

// finish writes the last state, if a progress line was shown at all.
func (p *progress) finish(sent int, acked, failed int64) {
	if p.quiet || !p.printed {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", p.line(sent, acked, failed))
	} else {
		fmt.Fprintln(p.w, p.line(sent, acked, failed))
	}
}
