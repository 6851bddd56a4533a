package streamrun_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/subscribe"
)

// A pipeline run as `streamrun run --memory --input - --until-drained`
// runs it: the embedded broker in memory, the uppercase handler built from
// its Go package and run as a plugin process, two lines of input, and the
// final outputs read back until everything is processed.
func Example() {
	shout := pipelines.Pipeline{
		Name: "shout",
		Source: pipelines.Source{
			Topics:          []string{"words"},
			Subscription:    "shout",
			Type:            pipelines.Exclusive,
			InitialPosition: pipelines.Earliest,
		},
		Handler: pipelines.Handler{
			Package: "./examples/plugins/uppercase",
			Config:  map[string]any{"output": "shouts"},
		},
		Outputs: []string{"shouts"},
	}
	r, err := streamrun.Start(context.Background(), streamrun.Options{
		Pipelines:    []pipelines.File{{Pipelines: []pipelines.Pipeline{shout}}},
		Broker:       streamrun.BrokerOptions{Memory: true, Listen: "127.0.0.1:0", HTTP: "-"},
		Input:        &streamrun.Input{Lines: strings.NewReader("hello\nstreamrun\n")},
		UntilDrained: true,
		FinalOutputs: func(topic string, m *subscribe.Message) { fmt.Printf("%s: %s\n", topic, m.Payload) },
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Wait(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("processed", r.InputSent())
	// Output:
	// persistent://public/default/shouts: HELLO
	// persistent://public/default/shouts: STREAMRUN
	// processed 2
}

// The files of a deployment, run until SIGINT or SIGTERM with everything
// `streamrun run` does: their service URL (or the embedded broker), their
// telemetry, reloads on SIGHUP and when a file or handler changes.
func ExampleStart() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, err := streamrun.Start(ctx, streamrun.Options{
		Files:          []string{"pipelines/orders.yaml", "pipelines/audit.yaml"},
		ReloadOnSIGHUP: true,
		Watch:          true,
	})
	if err != nil {
		log.Fatal(err) // a *streamrun.FilesError says FILE:LINE:COL: what is wrong
	}
	if err := r.Wait(); err != nil {
		log.Fatal(err)
	}
}
