// Package plugin is streamrun's handler SDK: what a handler author
// writes against. The host's end of the contract (starting plugin
// processes, sending them batches, telling crashes from hangs) is package
// plugin/host, which only the streamrun runtime needs.
//
// A handler is a Go program of its own. The streamrun host starts it as a
// child process, hands it batches of messages from a subscription, and
// publishes what it answers, so a handler that panics, leaks or is killed
// never takes a broker connection down with it: the host starts a fresh
// process and retries the batch there. hashicorp/go-plugin and gRPC carry
// the calls; this package hides both.
//
// # Writing a handler
//
// Implement Handler, one method, as you would http.Handler:
//
//	type Handler interface {
//		Process(ctx context.Context, w ResultWriter, batch []*Message) error
//	}
//
// and pass it to Serve from main. For each message, say on the ResultWriter
// what the host should do: publish outputs (Output), retry it, dead-letter
// it or drop it. A message you say nothing about is acknowledged after its
// outputs have been published, and only then (at-least-once): the host acks
// an input only once every output of it has its send receipt. Returning an
// error retries the whole batch.
//
// Most handlers look at one message at a time; MessageFunc is that shape,
// and its error picks the outcome (DeadLetter, RetryAfter, Drop, or any
// other error for a retry). JSON decodes payloads into a type of yours and
// encodes what you Emit. Configure decodes the pipeline's handler config
// into a struct of yours, strictly, before the first batch. A complete
// handler, which routes JSON orders to one of two topics by amount:
//
//	package main
//
//	import (
//		"context"
//		"errors"
//
//		"github.com/streamrun/streamrun/plugin"
//	)
//
//	type config struct {
//		Large     string  `json:"large"`     // topic for big orders
//		Small     string  `json:"small"`     // topic for the rest
//		Threshold float64 `json:"threshold"` // what "big" means
//	}
//
//	type order struct {
//		ID     string  `json:"id"`
//		Amount float64 `json:"amount"`
//	}
//
//	func main() {
//		plugin.Serve(plugin.Configure(func(_ context.Context, cfg config) (plugin.Handler, error) {
//			if cfg.Large == "" || cfg.Small == "" {
//				return nil, errors.New(`"large" and "small" are required`)
//			}
//			return plugin.JSON(func(_ context.Context, o order, m *plugin.Message) ([]plugin.Emit[order], error) {
//				if o.ID == "" {
//					return nil, plugin.DeadLetter(errors.New("order without id"))
//				}
//				topic := cfg.Small
//				if o.Amount >= cfg.Threshold {
//					topic = cfg.Large
//				}
//				return []plugin.Emit[order]{{Topic: topic, Key: o.ID, Value: o}}, nil
//			}), nil
//		}))
//	}
//
// with, in the pipeline file, a handler config such as
// {"large": "persistent://shop/orders/large", "small": "persistent://shop/orders/small", "threshold": 1000}.
// Build it with go build; the pipeline names the binary. examples/plugins
// holds more: uppercase, enrich, panicky, slow.
//
// A handler that needs setup or teardown of its own implements Initializer
// and Closer. Process calls never overlap within one process unless
// ServeOptions.Concurrency allows it (for a handler safe for concurrent
// use); the host runs several processes of a handler for parallelism.
//
// # Logs
//
// In a plugin, log with log/slog (or the log package): Serve points both at
// the process's stderr as JSON, at the host's log level, and the host logs
// every record again as its own, at the record's level, with its
// attributes, tagged plugin=<name> and instance=<id>. Lines written to
// os.Stdout and os.Stderr reach the host's log too (at INFO, with
// stream=stdout or stream=stderr), and so does the trace of a crash (one
// ERROR record).
//
// # Panics and crashes
//
// A panic in a handler ends its process: the SDK reports the panic value,
// the stack and the message being handled to the host, which kills the
// process, logs the crash naming that message, then restarts the handler
// and retries the batch. A panic in a goroutine of the handler's own, an
// exit or a SIGKILL is a crash too, without the message.
//
// # Testing a handler
//
// Package plugin/plugintest runs a handler in the test's process (Init
// with a config, batches of messages made in a line, Close at the end)
// and reads back each message's outcome, the outputs the host would
// publish and its change to keyed state (Options.State seeds it); a panic comes back as a *PanicError naming the message
// (ProcessLocal, underneath, is the same call without the setting up).
// `streamrun new handler NAME --lang go` writes a module with a handler,
// its test on plugintest and a pipeline file to start from (docs/new.md).
// `streamrun test` runs the built plugin in its pipeline on a broker,
// with inputs, expected outputs and faults written in a test file
// (docs/testing.md).
//
// # The contract
//
// plugin/proto/handler.proto is the contract, version ContractVersion;
// the generated Go code is checked in (plugin/internal/pb, `go generate
// ./plugin/...`). The version is negotiated in go-plugin's handshake, never
// guessed: a host and a plugin of different versions refuse each other at
// start, naming both. The magic cookie keeps a plugin binary that is run by
// hand from waiting for a host that is not there. The gRPC connection
// uses mTLS with certificates made for each start (go-plugin's AutoMTLS),
// over a Unix socket. From contract version 2 on (a Go host and this SDK
// on Unix), batches and answers do not travel on gRPC but on the batch
// channel, a socket pair the host makes for the instance and hands the
// plugin at its start: one frame each way per batch, the same bytes. The
// handler sees no difference; from version 3 on, the SDK answers the
// common outcomes (an ack, an output echoing its input) in a byte a
// message; from version 5 on, an incremental window comes in a compact
// binary form (ReadWindow reads both) and a window due with messages
// waiting as one add and fire (IncrementalWindow). Messages may be up to
// 64 MiB each way
// (DefaultMaxMessageSize; gRPC's default is 4 MiB), so that a batch of
// Pulsar's largest messages fits; ServeOptions.MaxMessageSize (and the
// host's ClientOptions.MaxMessageSize) change it. Nothing in the contract
// is Go's: sdk/python implements it in Python, and
// docs/handlers-any-language.md describes it for any gRPC language.
//
// # Cost
//
// Measured with plugin/host's BenchmarkProcess and BenchmarkProcessLocal
// (100-byte messages, one output each, host and plugin sharing 2 busy
// cores, on the batch channel): a round trip costs about 2 µs of CPU a
// message in the two processes together at batch 100 and 1.5 to 2 at
// batch 1000, against about 0.4 µs for the same handler in-process. A
// batch has a fixed cost (a write and a read each way, two wake-ups), so
// batching is what makes the process boundary cheap. docs/benchmarks/plugin-boundary.md
// has the figures and the commands.
package plugin
