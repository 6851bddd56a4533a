package streamrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// finalOutputs reads what reaches the run's final output topics (the
// declared outputs no pipeline of the run reads) for
// Options.FinalOutputs, through a subscription of its own made before the
// first input and removed at the end.
type finalOutputs struct {
	cons   *subscribe.Consumer
	fn     func(topic string, m *subscribe.Message)
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	counts map[string]int64
}

func startFinalOutputs(ctx context.Context, client *pool.Client, w *watch, fn func(string, *subscribe.Message), log *slog.Logger) (*finalOutputs, error) {
	fo := &finalOutputs{fn: fn, log: log, counts: map[string]int64{}, done: make(chan struct{})}
	if len(w.sinks) == 0 {
		close(fo.done)
		return fo, nil
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
	fo.cons = cons
	rctx, cancel := context.WithCancel(context.Background())
	fo.cancel = cancel
	go fo.loop(rctx)
	return fo, nil
}

func (fo *finalOutputs) loop(ctx context.Context) {
	defer close(fo.done)
	for {
		m, err := fo.cons.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				fo.log.Warn("reading the outputs stopped", "err", err)
			}
			return
		}
		t := fullTopic(m.Topic)
		fo.fn(t, m)
		_ = fo.cons.Ack(ctx, m)
		fo.mu.Lock()
		fo.counts[t]++
		fo.mu.Unlock()
	}
}

// count is how many messages of topic were read.
func (fo *finalOutputs) count(topic string) int64 {
	fo.mu.Lock()
	defer fo.mu.Unlock()
	return fo.counts[topic]
}

// close stops reading and removes the subscription, so that nothing is
// kept for it on the broker.
func (fo *finalOutputs) close() {
	if fo.cons == nil {
		return
	}
	fo.cancel()
	<-fo.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fo.cons.Unsubscribe(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fo.log.Debug("remove the print subscription", "err", err)
		_ = fo.cons.Close(ctx)
	}
}
