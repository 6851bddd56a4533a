// Command quickstart runs a whole streamrun pipeline on one machine with
// nothing but Go, through the same entry point as `streamrun run`
// (package streamrun): the embedded broker starts in memory, a pipeline
// feeds topic quickstart-in through the uppercase handler plugin (built
// from examples/plugins/uppercase, run as its own process) into
// quickstart-out, and the program publishes messages, reads the results
// back and checks that every one arrived, each key's in the order it was
// published, no stored entry mixing keys.
//
//	go run ./examples/quickstart          # from the repository root
//	go run ./examples/quickstart -n 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

func main() {
	n := flag.Int("n", 10000, "messages to send through the pipeline")
	pkg := flag.String("handler", "./examples/plugins/uppercase", "Go package of the handler plugin (built at start)")
	verbose := flag.Bool("v", false, "log at info level (default: warnings only)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, os.Stdout, *n, *pkg, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// keys is how many keys the messages are spread over.
const keys = 16

// pipeline is the quickstart's pipeline file, written in Go: what
// examples/pipelines/quickstart.yaml says in YAML. No service URL: the
// embedded broker.
func pipeline(pkg string) pipelines.File {
	return pipelines.File{Pipelines: []pipelines.Pipeline{{
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
	}}}
}

// run sends n messages through the pipeline and returns what it saw of
// the outputs.
func run(ctx context.Context, stdout io.Writer, n int, pkg string, verbose bool) (*outputs, error) {
	if n <= 0 {
		return nil, fmt.Errorf("-n must be positive, got %d", n)
	}
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	start := time.Now()

	seen := newOutputs(n)
	r, err := streamrun.Start(ctx, streamrun.Options{
		Pipelines: []pipelines.File{pipeline(pkg)},
		// In memory, on free ports, so it never collides with a broker
		// already running here.
		Broker:       streamrun.BrokerOptions{Memory: true, Listen: "127.0.0.1:0", HTTP: "-"},
		Notices:      stdout,
		Logger:       log,
		FinalOutputs: func(_ string, m *subscribe.Message) { seen.add(m) },
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		r.Stop()
		_ = r.Wait()
	}()
	fmt.Fprintf(stdout, "pipeline \"uppercase\": quickstart-in -> %s (plugin process) -> quickstart-out\n", pkg)

	// Publish n messages; the client batches them (by key: the pipeline
	// reads KeyShared) and blocks when too many are pending, so this loop
	// never outruns the broker.
	sendErr := make(chan error, 1)
	for i := range n {
		r.Publish(ctx, "quickstart-in", pool.Message{
			Key:     fmt.Sprintf("user-%d", i%keys),
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
	if err := r.Client().Flush(ctx); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	select {
	case err := <-sendErr:
		return nil, fmt.Errorf("publish: %w", err)
	default:
	}
	fmt.Fprintf(stdout, "published %d messages to quickstart-in\n", n)

	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	select {
	case <-seen.all:
	case <-waitCtx.Done():
		return seen, fmt.Errorf("received %d of %d outputs: %w", seen.distinct(), n, waitCtx.Err())
	}
	if err := seen.check(); err != nil {
		return seen, err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "received all %d outputs from quickstart-out in %s (%.0f msg/s end to end, plugin build included)\n",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	fmt.Fprintf(stdout, "each key's outputs in order; %d stored entries, each holding one key\n", seen.entries())
	r.Stop()
	if err := r.Wait(); err != nil {
		return seen, fmt.Errorf("pipeline: %w", err)
	}
	for _, h := range r.Host().Health() {
		fmt.Fprintf(stdout, "pipeline %s: %s %s\n", h.Pipeline, h.State, h.Reason)
	}
	fmt.Fprintln(stdout, "ok")
	return seen, nil
}
