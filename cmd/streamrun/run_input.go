package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

// fullTopic is topic's full name without a partition suffix
// ("orders" -> "persistent://public/default/orders"), or topic itself when
// it is no topic name.
func fullTopic(topic string) string {
	t, err := pulsarwire.ParseTopic(topic)
	if err != nil {
		return topic
	}
	_, base := t.PartitionIndex()
	return base.String()
}

// pipeSources says which topics a pipeline reads.
type pipeSources struct {
	name    string
	topics  map[string]bool
	pattern *regexp.Regexp
}

func (s *pipeSources) reads(topic string) bool {
	if s.topics[topic] {
		return true
	}
	return s.pattern != nil && s.pattern.MatchString(topic)
}

// watch counts what is published to each topic during the run (the
// input, and the outputs the handlers asked for, at their receipts), so
// that a run can tell when everything it fed is processed.
type watch struct {
	pipes []pipeSources
	// sinks are the declared outputs no pipeline of the run reads.
	sinks []string

	mu        sync.Mutex
	published map[string]int64
}

func newWatch(l *loaded) *watch {
	w := &watch{published: map[string]int64{}}
	for _, p := range l.pipelines {
		s := pipeSources{name: p.Name, topics: map[string]bool{}}
		for _, t := range p.Source.Topics {
			s.topics[fullTopic(t)] = true
		}
		if p.Source.Pattern != "" {
			pat := p.Source.Pattern
			if !strings.Contains(pat, "://") {
				if strings.Count(pat, "/") >= 2 {
					pat = "persistent://" + pat
				} else {
					pat = "persistent://public/default/" + pat
				}
			}
			// Validated by the loader; a pattern that does not compile
			// here only makes the run wait for nothing from it.
			s.pattern, _ = regexp.Compile("^(?:" + pat + ")$")
		}
		w.pipes = append(w.pipes, s)
	}
	seen := map[string]bool{}
	for _, p := range l.pipelines {
		for _, o := range p.Outputs {
			t := fullTopic(o)
			if seen[t] || w.isRead(t) {
				continue
			}
			seen[t] = true
			w.sinks = append(w.sinks, t)
		}
	}
	return w
}

// isRead reports whether a pipeline of the run reads topic.
func (w *watch) isRead(topic string) bool {
	for i := range w.pipes {
		if w.pipes[i].reads(topic) {
			return true
		}
	}
	return false
}

// output is the host's Hooks.Output.
func (w *watch) output(_, topic string, err error) {
	if err == nil {
		w.add(fullTopic(topic))
	}
}

func (w *watch) add(topic string) {
	w.mu.Lock()
	w.published[topic]++
	w.mu.Unlock()
}

// drained reports whether every pipeline has settled (acknowledged,
// dead-lettered or dropped: not handed back for a retry) as many messages
// as were published to its topics during the run, and the printer, if
// any, has printed every output that reached the final topics. The
// settled counts are read before the published ones: an output is
// counted published before its input is acknowledged, so a message
// settled upstream is always waited for downstream.
func (w *watch) drained(h *runtime.Host, pr *outputPrinter) bool {
	settled := map[string]int64{}
	for _, s := range h.Stats() {
		settled[s.Pipeline] = s.Acked + s.DeadLettered + s.Dropped
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.pipes {
		p := &w.pipes[i]
		var want int64
		for t, n := range w.published {
			if p.reads(t) {
				want += n
			}
		}
		if settled[p.name] < want {
			return false
		}
	}
	if pr != nil {
		for _, t := range w.sinks {
			if pr.count(t) < w.published[t] {
				return false
			}
		}
	}
	return true
}

// inputFeed publishes the lines of --input to one topic.
type inputFeed struct {
	name   string // the file, for messages
	topic  string
	keySep string
	r      io.ReadCloser

	sent atomic.Int64 // receipted
	done atomic.Bool
	// tr traces each line's publishing; nil when not traced.
	tr *commandTracing
}

// openInput opens --input and picks its topic: --input-topic, or the one
// source topic of the first pipeline. Some pipeline of the run must read
// it.
func openInput(c runConfig, l *loaded) (*inputFeed, error) {
	topic := c.inputTopic
	if topic == "" {
		p := l.pipelines[0]
		if len(p.Source.Topics) != 1 {
			return nil, fmt.Errorf("--input: pipeline %s reads %s; say which topic the input goes to with --input-topic",
				p.Name, describeSource(p.Source.Topics, p.Source.Pattern))
		}
		topic = p.Source.Topics[0]
	}
	if _, err := pulsarwire.ParseTopic(topic); err != nil {
		return nil, fmt.Errorf("--input-topic: %w", err)
	}
	topic = fullTopic(topic)
	if !newWatch(l).isRead(topic) {
		return nil, fmt.Errorf("--input-topic %s: no pipeline reads it", topic)
	}
	f := &inputFeed{name: c.input, topic: topic, keySep: c.keySep}
	if c.input == "-" {
		f.name, f.r = "stdin", io.NopCloser(os.Stdin)
		return f, nil
	}
	r, err := os.Open(c.input)
	if err != nil {
		return nil, fmt.Errorf("--input: %w", err)
	}
	f.r = r
	return f, nil
}

func describeSource(topics []string, pattern string) string {
	if pattern != "" {
		return "the pattern " + pattern
	}
	return fmt.Sprintf("%d topics", len(topics))
}

// maxInputLine is the longest input line: a message the brokers take.
const maxInputLine = pulsarwire.DefaultMaxMessageSize

// feed publishes every non-empty line and waits for the receipts. Each
// receipt counts the message as published to the topic. It returns when
// the input is published or ctx ends.
func (f *inputFeed) feed(ctx context.Context, client *pool.Client, w *watch) error {
	// The lines are read on a goroutine of their own, so that an input
	// that blocks (a terminal on stdin) does not hold up a stop: it ends
	// at the end of the input, or at its next line (or close) once ctx has
	// ended.
	lines := make(chan inputLine)
	readErr := make(chan error, 1)
	go f.read(ctx, lines, readErr)

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
read:
	for {
		var l inputLine
		select {
		case <-ctx.Done():
			fail(ctx.Err())
			break read
		case next, ok := <-lines:
			if !ok {
				if err := <-readErr; err != nil {
					fail(err)
				}
				break read
			}
			l = next
		}
		m := pool.Message{Payload: []byte(l.text)}
		if f.keySep != "" {
			if k, v, ok := strings.Cut(l.text, f.keySep); ok {
				m.Key, m.Payload = k, []byte(v)
			}
		}
		wg.Add(1)
		m, done := f.tr.send(f.topic, m, func(_ pulsarwire.MessageID, err error) {
			defer wg.Done()
			if err != nil {
				fail(fmt.Errorf("publish line %d of %s to %s: %w", l.n, f.name, f.topic, err))
				return
			}
			f.sent.Add(1)
			w.add(f.topic)
		})
		client.PublishAsync(ctx, f.topic, m, done)
	}
	if err := client.Flush(ctx); err != nil {
		fail(fmt.Errorf("publish %s: %w", f.name, err))
	}
	wg.Wait()
	f.done.Store(true)
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// inputLine is a non-empty line of the input and its number.
type inputLine struct {
	n    int
	text string
}

// read sends the input's non-empty lines, then closes lines and sends
// the read error (nil at the end of the input, or once ctx ended).
func (f *inputFeed) read(ctx context.Context, lines chan<- inputLine, errc chan<- error) {
	defer close(lines)
	sc := bufio.NewScanner(f.r)
	sc.Buffer(make([]byte, 64*1024), maxInputLine)
	n := 0
	for sc.Scan() {
		n++
		if sc.Text() == "" {
			continue
		}
		select {
		case lines <- inputLine{n, sc.Text()}:
		case <-ctx.Done():
			errc <- nil
			return
		}
	}
	if err := sc.Err(); err != nil {
		errc <- fmt.Errorf("read %s (line %d): %w", f.name, n+1, err)
		return
	}
	errc <- nil
}

// finished reports whether every line was published.
func (f *inputFeed) finished() bool { return f.done.Load() }

func (f *inputFeed) close() { _ = f.r.Close() }

// outputPrinter prints what reaches the run's final output topics (the
// declared outputs no pipeline reads), through a subscription of its own
// made before the first input and removed at the end.
type outputPrinter struct {
	cons   *subscribe.Consumer
	out    io.Writer
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	counts map[string]int64
}

func startPrinter(ctx context.Context, client *pool.Client, l *loaded, w *watch, out io.Writer, log *slog.Logger) (*outputPrinter, error) {
	pr := &outputPrinter{out: out, log: log, counts: map[string]int64{}, done: make(chan struct{})}
	if len(w.sinks) == 0 {
		close(pr.done)
		return pr, nil
	}
	cons, err := subscribe.New(ctx, client, subscribe.Options{
		Topics:       w.sinks,
		Subscription: fmt.Sprintf("streamrun-run-print-%d-%d", os.Getpid(), time.Now().UnixNano()),
		Type:         subscribe.Exclusive,
		Logger:       log.With("component", "print"),
	})
	if err != nil {
		return nil, err
	}
	pr.cons = cons
	rctx, cancel := context.WithCancel(context.Background())
	pr.cancel = cancel
	go pr.loop(rctx)
	return pr, nil
}

func (pr *outputPrinter) loop(ctx context.Context) {
	defer close(pr.done)
	for {
		m, err := pr.cons.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				pr.log.Warn("reading the outputs stopped", "err", err)
			}
			return
		}
		t := fullTopic(m.Topic)
		short := strings.TrimPrefix(t, "persistent://public/default/")
		if m.Key != "" {
			fmt.Fprintf(pr.out, "%s [%s] %s\n", short, m.Key, m.Payload)
		} else {
			fmt.Fprintf(pr.out, "%s %s\n", short, m.Payload)
		}
		_ = pr.cons.Ack(ctx, m)
		pr.mu.Lock()
		pr.counts[t]++
		pr.mu.Unlock()
	}
}

// count is how many messages of topic were printed.
func (pr *outputPrinter) count(topic string) int64 {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.counts[topic]
}

// total is how many messages were printed.
func (pr *outputPrinter) total() int64 {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var n int64
	for _, c := range pr.counts {
		n += c
	}
	return n
}

// close stops printing and removes the subscription, so that nothing is
// kept for it on the broker.
func (pr *outputPrinter) close() {
	if pr.cons == nil {
		return
	}
	pr.cancel()
	<-pr.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pr.cons.Unsubscribe(ctx); err != nil && !errors.Is(err, context.Canceled) {
		pr.log.Debug("remove the print subscription", "err", err)
		_ = pr.cons.Close(ctx)
	}
}
