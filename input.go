package streamrun

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/streamrun/streamrun/internal/msglines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
)

// Input is text whose lines a run publishes once every pipeline runs:
// each line a message, blank lines (nothing but spaces) skipped.
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
	// The lines are read on a goroutine of their own (msglines.Read): it
	// ends at the end of the input, or at its next line once ctx has
	// ended.
	lines := msglines.Read(ctx, f.in.Name, f.in.Lines)
	dec := msglines.Decoder{KeySeparator: f.in.KeySeparator}

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
	for {
		l, ok, err := lines.Next(ctx)
		if err != nil {
			fail(err)
		}
		if !ok {
			if ctx.Err() != nil {
				fail(ctx.Err())
			}
			break
		}
		m, _ := dec.Message(l.Text) // a text line is always a message
		wg.Add(1)
		m, done := f.tel.send(f.topic, m, func(_ pulsarwire.MessageID, err error) {
			defer wg.Done()
			if err != nil {
				fail(fmt.Errorf("publish line %d of %s to %s: %w", l.N, f.in.Name, f.topic, err))
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

// finished reports whether every line was published.
func (f *inputFeed) finished() bool { return f.done.Load() }
