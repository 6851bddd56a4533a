// Package host is the host's end of the handler plugin contract: it
// starts a handler plugin (a program built on package plugin) as a child
// process, hands it its config, sends it batches and tells apart how a
// call failed. The streamrun runtime is its user; a handler author needs
// only package plugin.
//
// The runtime starts an instance with Start, hands it the config with
// Init, sends batches with Process and stops it with Close (graceful) or
// Kill. Instance.Process may be called from several goroutines: every
// batch travels on one long-lived gRPC stream (Batches) with a number its
// answer repeats, so answers may come in any order. Process checks the
// plugin's answer and never panics on a wrong one: a missing, doubled or
// out-of-range result, an unknown outcome or an output without a topic is
// a *ResponseError (ErrBadResponse) naming the plugin and the message.
// Instance documents how each failure is told apart: crash, deadline (a
// hang), wrong answer, refused config.
//
// Process takes plugin.Messages; ProcessBatch takes a Batch, the
// caller's messages in a form of its own, read by index while the batch
// is encoded (the runtime's, as its consumer received them), so that no
// plugin.Message or id string is made of each.
//
// # Crashes
//
// A panic in a handler ends its process: the SDK reports the panic value,
// the stack and the message being handled, and Process returns a
// *CrashError (ErrCrashed) naming that message once the process is
// killed. A panic in a goroutine of the handler's own, an exit or a
// SIGKILL gives a *CrashError too, without the message. ProcessLocal runs
// a handler in the host's own process and reports its panic the same way.
//
// Plugin processes die with the host, even when the host is killed with
// SIGKILL: on Linux each child gets SIGKILL as its parent-death signal,
// from a thread that outlives it.
//
// # Logs
//
// A plugin's slog records (JSON lines on its stderr) are logged again
// through ClientOptions.Logger, at their own level with their attributes,
// tagged plugin=<name> and instance=<id>; its other output on stdout and
// stderr at INFO with stream=stdout or stream=stderr; a Go crash trace,
// and each Python traceback, as one ERROR record. A plugin that ends
// before its handshake fails Start with the end of its stderr quoted
// (up to 20 lines: a traceback's end, a Go trace's start).
//
// # Cost
//
// Measured with BenchmarkProcess and BenchmarkProcessLocal (100-byte
// messages, one output each, host and plugin sharing 2 cores): a round
// trip on the Batches stream costs about 60 µs (75 µs of CPU in the two
// processes); per message, about 1.6 µs in batches of 100 and 0.85 µs in
// batches of 1000. The same handler in-process costs under 0.2 µs a
// message, so batching is what makes the process boundary cheap.
package host
