package streamrun

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Input is text whose lines a run publishes once every pipeline runs:
// each non-empty line a message.
type Input struct {
	// Lines are read to their end. The run does not close it.
	Lines io.Reader
	// Name is what messages call the input (a file name). Default
	// "input".
	Name string
	// Topic the lines go to. Some pipeline of the run must read it.
	// Default: the one source topic of the first pipeline (an error when
	// it reads several, or a pattern).
	Topic string
	// KeySeparator splits a key off each line at its first occurrence:
	// key, then payload. Default "": no key.
	KeySeparator string
}

// maxInputLine is the longest input line: a message the brokers take.
const maxInputLine = pulsarwire.DefaultMaxMessageSize

// inputFeed publishes the lines of an Input to one topic.
type inputFeed struct {
	in    Input
	topic string

	sent atomic.Int64 // receipted
	done atomic.Bool
	tel  *hostTelemetry // traces each line's publishing
}

// openInput picks in's topic: in.Topic, or the one source topic of the
// first pipeline. Some pipeline of the run must read it.
func openInput(in Input, fs *Files) (*inputFeed, error) {
	if in.Name == "" {
		in.Name = "input"
	}
	topic := in.Topic
	if topic == "" {
		p := fs.pipelines[0]
		if len(p.Source.Topics) != 1 {
			return nil, &OptionError{"Input", fmt.Errorf("pipeline %s reads %s; say which topic the input goes to",
				p.Name, describeSource(p.Source.Topics, p.Source.Pattern))}
		}
		topic = p.Source.Topics[0]
	}
	if _, err := pulsarwire.ParseTopic(topic); err != nil {
		return nil, &OptionError{"Input.Topic", err}
	}
	topic = fullTopic(topic)
	if !newWatch(fs).isRead(topic) {
		return nil, &OptionError{"Input.Topic", fmt.Errorf("%s: no pipeline reads it", topic)}
	}
	return &inputFeed{in: in, topic: topic}, nil
}

func describeSource(topics []string, pattern string) string {
	if pattern != "" {
		return "the pattern " + pattern
	}
	return fmt.Sprintf("%d topics", len(topics))
}

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
		if sep := f.in.KeySeparator; sep != "" {
			if k, v, ok := strings.Cut(l.text, sep); ok {
				m.Key, m.Payload = k, []byte(v)
			}
		}
		wg.Add(1)
		m, done := f.tel.send(f.topic, m, func(_ pulsarwire.MessageID, err error) {
			defer wg.Done()
			if err != nil {
				fail(fmt.Errorf("publish line %d of %s to %s: %w", l.n, f.in.Name, f.topic, err))
				return
			}
			f.sent.Add(1)
			w.add(f.topic)
		})
		client.PublishAsync(ctx, f.topic, m, done)
	}
	if err := client.Flush(ctx); err != nil {
		fail(fmt.Errorf("publish %s: %w", f.in.Name, err))
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
	sc := bufio.NewScanner(f.in.Lines)
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
		errc <- fmt.Errorf("read %s (line %d): %w", f.in.Name, n+1, err)
		return
	}
	errc <- nil
}

// finished reports whether every line was published.
func (f *inputFeed) finished() bool { return f.done.Load() }
