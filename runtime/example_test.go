package runtime_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/streamrun/streamrun/pipelines"
	"github.com/streamrun/streamrun/pool"
	streamrun "github.com/streamrun/streamrun/runtime"
)

// A host running one pipeline until SIGINT or SIGTERM, then stopping
// gracefully: the uppercase example plugin, two instances, each key's
// order kept.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	h, err := streamrun.New(ctx, streamrun.Options{
		Pool:            pool.Options{ServiceURL: "pulsar://127.0.0.1:6650"},
		ShutdownTimeout: 20 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	err = h.Run(ctx, pipelines.Pipeline{
		Name: "shout",
		Source: pipelines.Source{
			Topics:          []string{"persistent://public/default/words"},
			Subscription:    "shout",
			Type:            pipelines.KeyShared,
			InitialPosition: pipelines.Earliest,
		},
		Handler: pipelines.Handler{
			Plugin:    "./bin/uppercase",
			Config:    map[string]any{"output": "persistent://public/default/shouts"},
			Instances: 2,
		},
		Outputs:     []string{"persistent://public/default/shouts"},
		ErrorPolicy: pipelines.ErrorPolicy{MaxRetries: 5},
	})
	if err != nil {
		log.Fatal(err)
	}
}
