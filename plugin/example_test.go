package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamrun/streamrun/plugin"
)

// A handler of one message at a time: uppercase every payload to a topic.
func ExampleMessageFunc() {
	h := plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		if len(m.Payload) == 0 {
			return nil, plugin.Drop("empty")
		}
		return []plugin.Output{{Topic: "upper", Key: m.Key, Payload: bytes.ToUpper(m.Payload)}}, nil
	})
	res, _ := plugin.ProcessLocal(context.Background(), h, []*plugin.Message{
		{ID: "1:1:-1:-1", Payload: []byte("hello")},
		{ID: "1:2:-1:-1"},
	})
	for _, r := range res {
		fmt.Println(r.Outcome, len(r.Outputs))
	}
	fmt.Printf("%s\n", res[0].Outputs[0].Payload)
	// Output:
	// ack 1
	// drop 0
	// HELLO
}

// A batch handler answers on the ResultWriter; saying nothing is an ack.
func ExampleHandlerFunc() {
	h := plugin.HandlerFunc(func(ctx context.Context, w plugin.ResultWriter, batch []*plugin.Message) error {
		for _, m := range batch {
			switch {
			case m.RedeliveryCount >= 3:
				w.DeadLetter(m, "gave up after 3 deliveries")
			case bytes.Equal(m.Payload, []byte("busy")):
				w.Retry(m, time.Second, "downstream busy")
			default:
				w.Output(m, plugin.Output{Topic: "copy", Payload: m.Payload})
			}
		}
		return nil
	})
	res, _ := plugin.ProcessLocal(context.Background(), h, []*plugin.Message{
		{Payload: []byte("a")}, {Payload: []byte("busy")}, {Payload: []byte("c"), RedeliveryCount: 3},
	})
	for _, r := range res {
		fmt.Printf("%s %v %q\n", r.Outcome, r.RetryDelay, r.Reason)
	}
	// Output:
	// ack 0s ""
	// retry 1s "downstream busy"
	// dead-letter 0s "gave up after 3 deliveries"
}

// JSON decodes payloads and encodes outputs; a payload that does not
// decode is dead-lettered.
func ExampleJSON() {
	type reading struct {
		Sensor  string  `json:"sensor"`
		Celsius float64 `json:"celsius"`
	}
	type alert struct {
		Sensor string `json:"sensor"`
		Hot    bool   `json:"hot"`
	}
	h := plugin.JSON(func(_ context.Context, r reading, _ *plugin.Message) ([]plugin.Emit[alert], error) {
		if r.Celsius < 30 {
			return nil, nil // ack, nothing to say
		}
		return []plugin.Emit[alert]{{Topic: "alerts", Key: r.Sensor, Value: alert{r.Sensor, true}}}, nil
	})
	res, _ := plugin.ProcessLocal(context.Background(), h, []*plugin.Message{
		{Payload: []byte(`{"sensor":"s1","celsius":35}`)},
		{Payload: []byte(`{"sensor":"s2","celsius":20}`)},
		{Payload: []byte(`oops`)},
	})
	fmt.Printf("%s %s\n", res[0].Outputs[0].Topic, res[0].Outputs[0].Payload)
	fmt.Println(res[1].Outcome, len(res[1].Outputs))
	fmt.Println(res[2].Outcome)
	// Output:
	// alerts {"sensor":"s1","hot":true}
	// ack 0
	// dead-letter
}

// Configure builds the handler from the pipeline's config; main would pass
// it to plugin.Serve.
func ExampleConfigure() {
	type config struct {
		Output string `json:"output"`
	}
	h := plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		if cfg.Output == "" {
			return nil, errors.New(`"output" is required`)
		}
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			return []plugin.Output{{Topic: cfg.Output, Payload: m.Payload}}, nil
		}), nil
	})
	init := h.(plugin.Initializer)
	fmt.Println(init.Init(context.Background(), plugin.Info{Config: []byte(`{"ouput":"x"}`)}))
	fmt.Println(init.Init(context.Background(), plugin.Info{Config: []byte(`{}`)}))
	fmt.Println(init.Init(context.Background(), plugin.Info{Config: []byte(`{"output":"copies"}`)}))
	// Output:
	// config: json: unknown field "ouput"
	// "output" is required
	// <nil>
}
