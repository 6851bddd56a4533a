// Command quickstart runs a whole streamrun pipeline on one machine with
// nothing but Go: it starts the embedded broker in memory, runs a pipeline
// that feeds topic quickstart-in through the uppercase handler plugin
// (built from examples/plugins/uppercase, run as its own process) into
// quickstart-out, publishes messages, reads the results back and checks
// that every one arrived.
//
//	go run ./examples/quickstart          # from the repository root
//	go run ./examples/quickstart -n 100000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/streamrun/streamrun/broker"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/runtime"
	"github.com/streamrun/streamrun/subscribe"
)

func main() {
	n := flag.Int("n", 10000, "messages to send through the pipeline")
	pkg := flag.String("handler", "./examples/plugins/uppercase", "Go package of the handler plugin (built at start)")
	verbose := flag.Bool("v", false, "log at info level (default: warnings only)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *pkg, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, n int, pkg string, verbose bool) error {
	if n <= 0 {
		return fmt.Errorf("-n must be positive, got %d", n)
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	start := time.Now()

	// The embedded broker: in memory, on free ports, so it never collides
	// with a broker already running here.
	cluster, err := broker.Start(ctx, broker.Options{Listen: "127.0.0.1:0", HTTP: "-", Memory: true, Logger: log.With("component", "broker")})
	if err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	defer cluster.Close()
	fmt.Printf("embedded broker at %s\n", cluster.ServiceURL())

	client, err := pool.New(ctx, pool.Options{ServiceURL: cluster.ServiceURL(), Logger: log.With("component", "pool")})
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	// Read the output from its beginning, so nothing the pipeline writes
	// before we get there is missed.
	out, err := subscribe.New(ctx, client, subscribe.Options{
		Topics:          []string{"quickstart-out"},
		Subscription:    "quickstart-reader",
		InitialPosition: subscribe.Earliest,
		Logger:          log.With("component", "subscribe"),
	})
	if err != nil {
		return err
	}
	defer out.Close(context.Background())

	host, err := runtime.New(ctx, runtime.Options{Client: client, Logger: log.With("component", "runtime")})
	if err != nil {
		return err
	}
	p := pipelines.Pipeline{
		Name: "uppercase",
		Source: pipelines.Source{
			Topics:          []string{"quickstart-in"},
			Subscription:    "quickstart",
			Type:            pipelines.KeyShared,
			InitialPosition: pipelines.Earliest,
		},
		Handler: pipelines.Handler{
			Package: pkg,
			Config:  map[string]any{"output": "quickstart-out"},
		},
		Outputs: []string{"quickstart-out"},
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- host.Run(runCtx, p) }()
	fmt.Printf("pipeline %q: quickstart-in -> %s (plugin process) -> quickstart-out\n", p.Name, pkg)

	// Publish n messages; the pool batches them and blocks when too many
	// are pending, so this loop never outruns the broker.
	sendErr := make(chan error, 1)
	for i := range n {
		client.PublishAsync(ctx, "quickstart-in", pool.Message{
			Key:     fmt.Sprintf("user-%d", i%16),
			Payload: fmt.Appendf(nil, "hello streamrun %d", i),
		}, func(_ pulsarwire.MessageID, err error) {
			if err != nil {
				select {
				case sendErr <- err:
				default:
				}
			}
		})
	}
	if err := client.Flush(ctx); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	select {
	case err := <-sendErr:
		return fmt.Errorf("publish: %w", err)
	default:
	}
	fmt.Printf("published %d messages to quickstart-in\n", n)

	// Read every output once; the plugin may deliver a message twice after
	// a crash (at-least-once), so count distinct payloads.
	seen := make(map[string]bool, n)
	recvCtx, cancelRecv := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelRecv()
	for len(seen) < n {
		m, err := out.Receive(recvCtx)
		if err != nil {
			select {
			case e := <-runErr:
				return fmt.Errorf("pipeline stopped: %v (after %d of %d outputs)", e, len(seen), n)
			default:
			}
			return fmt.Errorf("receive output %d of %d: %w", len(seen)+1, n, err)
		}
		if !strings.HasPrefix(string(m.Payload), "HELLO STREAMRUN ") {
			return fmt.Errorf("unexpected output %q", m.Payload)
		}
		if len(seen) < 3 {
			fmt.Printf("  %s  key=%s  %q\n", m.ID, m.Key, m.Payload)
		}
		seen[string(m.Payload)] = true
		if err := out.Ack(ctx, m); err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("received all %d outputs from quickstart-out in %s (%.0f msg/s end to end, plugin build included)\n",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())

	stopRun()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("pipeline: %w", err)
	}
	for _, h := range host.Health() {
		fmt.Printf("pipeline %s: %s %s\n", h.Pipeline, h.State, h.Reason)
	}
	fmt.Println("ok")
	return nil
}
