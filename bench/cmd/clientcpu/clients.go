package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// client is one of the two clients, reduced to what is measured.
type client interface {
	connect(ctx context.Context, url string) error
	producer(ctx context.Context, topic string) error
	// sendAsync publishes payload; done is called with its receipt.
	sendAsync(ctx context.Context, payload []byte, done func(error))
	flush(ctx context.Context) error
	subscribe(ctx context.Context, topic, sub string) error
	// receiveAck receives one message and acknowledges it.
	receiveAck(ctx context.Context) error
	close()
}

func newClient(name string) (client, error) {
	switch name {
	case "streamrun":
		return &ours{}, nil
	case "official":
		return &official{}, nil
	}
	return nil, fmt.Errorf("-client %q: want streamrun or official", name)
}

// usage is this process's CPU time and peak RSS so far.
func usage() (user, sys time.Duration, maxRSS int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Maxrss * 1024
}

// writeHeapProfile writes the allocations so far to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// measured runs work between two getrusage readings; with profile set,
// it writes a CPU profile of work there.
func measured(profile string, work func() error) (measurement, error) {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return measurement{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return measurement{}, err
		}
		defer pprof.StopCPUProfile()
	}
	u0, s0, _ := usage()
	start := time.Now()
	err := work()
	el := time.Since(start)
	u1, s1, rss := usage()
	return measurement{
		CPUSeconds: (u1 - u0 + s1 - s0).Seconds(), UserSec: (u1 - u0).Seconds(), SysSec: (s1 - s0).Seconds(),
		Elapsed: el.Seconds(), MaxRSS: rss,
	}, err
}

func letters(size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return p
}

// measureProduce sends n messages of size bytes and waits for every
// receipt.
func measureProduce(ctx context.Context, c client, url, topic string, size, n int, profile string) (measurement, error) {
	if err := c.connect(ctx, url); err != nil {
		return measurement{}, err
	}
	defer c.close()
	if err := c.producer(ctx, topic); err != nil {
		return measurement{}, err
	}
	payload := letters(size)
	return measured(profile, func() error {
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		done := func(err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			wg.Done()
		}
		wg.Add(n)
		for range n {
			c.sendAsync(ctx, payload, done)
		}
		if err := c.flush(ctx); err != nil {
			return err
		}
		wg.Wait()
		if e := failed.Load(); e != nil {
			return *e
		}
		return nil
	})
}

// measureConsume receives and acknowledges n messages, one by one.
func measureConsume(ctx context.Context, c client, url, topic, sub string, n int, profile string) (measurement, error) {
	if err := c.connect(ctx, url); err != nil {
		return measurement{}, err
	}
	defer c.close()
	if err := c.subscribe(ctx, topic, sub); err != nil {
		return measurement{}, err
	}
	return measured(profile, func() error {
		for i := range n {
			if err := c.receiveAck(ctx); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
		}
		return nil
	})
}

// ours is streamrun's client: pool and subscribe.
type ours struct {
	c    *pool.Client
	p    *pool.Producer
	cons *subscribe.Consumer
}

func (o *ours) connect(ctx context.Context, url string) (err error) {
	o.c, err = pool.New(ctx, pool.Options{
		ServiceURL: url,
		Producer: pool.ProducerOptions{
			MaxPendingMessages: maxPending,
			Batching:           pool.BatchingOptions{MaxMessages: batchMessages, MaxBytes: batchBytes, MaxDelay: batchDelay},
		},
	})
	return err
}

func (o *ours) producer(ctx context.Context, topic string) (err error) {
	o.p, err = o.c.Producer(ctx, topic)
	return err
}

func (o *ours) sendAsync(ctx context.Context, payload []byte, done func(error)) {
	o.p.SendAsync(ctx, pool.Message{Payload: payload}, func(_ pulsarwire.MessageID, err error) { done(err) })
}

func (o *ours) flush(ctx context.Context) error { return o.p.Flush(ctx) }

func (o *ours) subscribe(ctx context.Context, topic, sub string) (err error) {
	o.cons, err = subscribe.New(ctx, o.c, subscribe.Options{
		Topics: []string{topic}, Subscription: sub, Type: subscribe.Shared,
		InitialPosition: subscribe.Earliest, ReceiverQueue: receiverQueue,
		AckGroupTime: ackGroupTime, AckGroupSize: ackGroupSize,
	})
	return err
}

func (o *ours) receiveAck(ctx context.Context) error {
	m, err := o.cons.Receive(ctx)
	if err != nil {
		return err
	}
	return o.cons.Ack(ctx, m)
}

func (o *ours) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if o.cons != nil {
		o.cons.Close(ctx)
	}
	if o.c != nil {
		o.c.Close(ctx)
	}
}

// official is github.com/apache/pulsar-client-go.
type official struct {
	c    pulsar.Client
	p    pulsar.Producer
	cons pulsar.Consumer
}

func (o *official) connect(_ context.Context, url string) (err error) {
	o.c, err = pulsar.NewClient(pulsar.ClientOptions{
		URL: url, Logger: pulsarlog.DefaultNopLogger(), MetricsRegisterer: prometheus.NewRegistry(),
	})
	return err
}

func (o *official) producer(_ context.Context, topic string) (err error) {
	o.p, err = o.c.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, MaxPendingMessages: maxPending,
		BatchingMaxMessages: batchMessages, BatchingMaxSize: batchBytes, BatchingMaxPublishDelay: batchDelay,
	})
	return err
}

func (o *official) sendAsync(ctx context.Context, payload []byte, done func(error)) {
	o.p.SendAsync(ctx, &pulsar.ProducerMessage{Payload: payload}, func(_ pulsar.MessageID, _ *pulsar.ProducerMessage, err error) { done(err) })
}

func (o *official) flush(ctx context.Context) error { return o.p.FlushWithCtx(ctx) }

func (o *official) subscribe(_ context.Context, topic, sub string) (err error) {
	o.cons, err = o.c.Subscribe(pulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: sub, Type: pulsar.Shared,
		SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize:           receiverQueue,
		AckGroupingOptions:          &pulsar.AckGroupingOptions{MaxSize: ackGroupSize, MaxTime: ackGroupTime},
	})
	return err
}

func (o *official) receiveAck(ctx context.Context) error {
	m, err := o.cons.Receive(ctx)
	if err != nil {
		return err
	}
	return o.cons.Ack(m)
}

func (o *official) close() {
	if o.cons != nil {
		o.cons.Close()
	}
	if o.p != nil {
		o.p.Close()
	}
	if o.c != nil {
		o.c.Close()
	}
}
