package pipelinetest

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// output is a message received on an output topic, copied.
type output struct {
	key        string
	properties map[string]string
	payload    []byte
}

// collector reads an output topic through a subscription of its own,
// made before the inputs are published.
type collector struct {
	topic string
	c     *subscribe.Consumer

	mu  sync.Mutex
	out []output
}

// collect subscribes to topic and reads it on a goroutine (counted in
// wg) until stop ends, through subscription streamrun-test-n; the consumer is closed then.
func collect(ctx, stop context.Context, client *pool.Client, topic string, n int, log *slog.Logger, wg *sync.WaitGroup) (*collector, error) {
	c, err := subscribe.New(ctx, client, subscribe.Options{Topics: []string{topic}, Subscription: fmt.Sprintf("streamrun-test-%d", n),
		InitialPosition: subscribe.Earliest, Logger: log.With("component", "subscribe")})
	if err != nil {
		return nil, fmt.Errorf("subscribe to the outputs to %s: %w", topic, err)
	}
	col := &collector{topic: topic, c: c}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(stop), 5*time.Second)
			defer cancel()
			_ = c.Close(cctx)
		}()
		for {
			m, err := c.Receive(stop)
			if err != nil {
				return // stop ended, or the consumer failed: the checks tell
			}
			col.mu.Lock()
			col.out = append(col.out, output{key: m.Key, properties: maps.Clone(m.Properties), payload: append([]byte(nil), m.Payload...)})
			col.mu.Unlock()
			_ = c.Ack(stop, m)
		}
	}()
	return col, nil
}

func (col *collector) got() []output {
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]output(nil), col.out...)
}
