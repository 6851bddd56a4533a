package host_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/host"
)

// The host's side: start a plugin, give it its config, send batches, stop it.
func ExampleStart() {
	ctx := context.Background()
	inst, err := host.Start(ctx, host.ClientOptions{Path: "./uppercase", Name: "uppercase", InstanceID: "1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Kill()
	if err := inst.Init(ctx, []byte(`{"output":"persistent://public/default/upper"}`)); err != nil {
		fmt.Println(err)
		return
	}
	res, err := inst.Process(ctx, []*plugin.Message{{ID: "1:1:-1:-1", Payload: []byte("hi")}})
	switch {
	case errors.Is(err, host.ErrCrashed):
		// Start a fresh instance and retry the batch there.
	case err != nil:
		// A deadline (a hang), or a wrong answer: Kill it and retry elsewhere.
	default:
		fmt.Println(res[0].Outcome, res[0].Outputs)
	}
	_ = inst.Close(ctx)
}
