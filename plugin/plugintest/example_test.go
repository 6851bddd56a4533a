package plugintest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamrun/streamrun/plugin"
	"github.com/streamrun/streamrun/plugin/plugintest"
)

// uppercase is the handler under test: each payload, uppercased, to the
// topic its config names; an empty payload dropped.
func uppercase() plugin.Handler {
	type config struct {
		Output string `json:"output"`
	}
	return plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
		if cfg.Output == "" {
			return nil, errors.New(`"output" is required`)
		}
		return plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
			if len(m.Payload) == 0 {
				return nil, plugin.Drop("empty")
			}
			return []plugin.Output{{Topic: cfg.Output, Key: m.Key, Payload: bytes.ToUpper(m.Payload)}}, nil
		}), nil
	})
}

// A batch in, the answer out. In a test, plugintest.New(t, ...) does
// what Start and Close do here, failing the test on an error.
func Example() {
	h, err := plugintest.Start(uppercase(), plugintest.Options{Config: map[string]any{"output": "shouted"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	keyed := plugintest.Text("hello")
	keyed.Key = "k1"
	a := h.Process(keyed, plugintest.Text(""))
	fmt.Print(a)
	fmt.Println(a.Outcome(1) == plugin.OutcomeDrop, len(a.OutputsTo("shouted")))
	// Output:
	// 0 ack
	//   -> shouted key="k1" payload="HELLO"
	// 1 drop "empty"
	// true 1
}

// A config the handler refuses fails its Init, and so the plugin's start.
func ExampleInit() {
	fmt.Println(plugintest.Init(uppercase(), plugintest.Options{Config: `{"ouput": "x"}`}))
	fmt.Println(plugintest.Init(uppercase(), plugintest.Options{}))
	// Output:
	// config: json: unknown field "ouput"
	// "output" is required
}

// JSON payloads in, dead letters and their reasons out.
func ExampleHandler_Process() {
	type order struct {
		ID     string  `json:"id"`
		Amount float64 `json:"amount"`
	}
	route := plugin.JSON(func(_ context.Context, o order, _ *plugin.Message) ([]plugin.Emit[order], error) {
		if o.ID == "" {
			return nil, plugin.DeadLetter(errors.New("order without id"))
		}
		return []plugin.Emit[order]{{Topic: "orders-checked", Key: o.ID, Value: o}}, nil
	})
	h, _ := plugintest.Start(route, plugintest.Options{})
	a := h.Process(plugintest.JSON(order{ID: "o1", Amount: 12.5}), plugintest.JSON(order{Amount: 3}), plugintest.Text("not json"))
	fmt.Print(a)
	// Output:
	// 0 ack
	//   -> orders-checked key="o1" payload="{\"id\":\"o1\",\"amount\":12.5}"
	// 1 dead-letter "order without id"
	// 2 dead-letter "decode payload as plugintest_test.order: invalid character 'o' in literal null (expecting 'u')"
}

// A message with a key, properties and an event time, and keyed state
// seeded before the first batch: the handler counts the messages of each
// key; the state it leaves is read back with State.
func ExampleOptions_state() {
	count := plugin.MessageFunc(func(_ context.Context, m *plugin.Message) ([]plugin.Output, error) {
		var n int
		if _, err := m.State().GetJSON(&n); err != nil {
			return nil, err
		}
		n++
		if err := m.State().PutJSON(n); err != nil {
			return nil, err
		}
		return []plugin.Output{{Topic: "counts", Key: m.Key, EventTime: m.EventTime,
			Properties: map[string]string{"source": m.Properties["source"]},
			Payload:    fmt.Appendf(nil, "%d", n)}}, nil
	})
	h, _ := plugintest.Start(count, plugintest.Options{State: map[string][]byte{"k1": []byte("41")}})
	defer h.Close()

	at := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	a := h.Process(
		&plugin.Message{Key: "k1", Properties: map[string]string{"source": "web"}, EventTime: at, Payload: []byte("x")},
		&plugin.Message{Key: "k2", Payload: []byte("y")},
	)
	fmt.Print(a)
	fmt.Println(a.Outputs()[0].EventTime.Equal(at), string(h.State()["k1"]), string(h.State()["k2"]))
	// Output:
	// 0 ack
	//   -> counts key="k1" properties=map[source:web] payload="42"
	//   state "k1" = "42"
	// 1 ack
	//   -> counts key="k2" properties=map[source:] payload="1"
	//   state "k2" = "1"
	// true 42 1
}
