// Package streamrun runs pipeline files: `streamrun run` as a library.
// One call, Start, takes a set of pipeline files (docs/pipelines.md) to a
// running host with every rule the command applies:
//
//   - the files are read and checked together (Load): names unique across
//     them, one set of connection settings, one telemetry section;
//   - the client is made from the files' service URL, TLS, token and
//     operation retries (Files.ClientOptions), its producers batching by
//     key when a pipeline reads KeyShared, since the broker dispatches a
//     batched entry whole, by its first key;
//   - with no service URL, the embedded broker starts in this process (in
//     memory or in a data directory, on the default ports or free ones
//     when those are taken) and a one-line notice gives its URLs;
//   - traces, metrics and health endpoints as the files' telemetry section
//     and the OTEL_* environment say;
//   - reloads on SIGHUP, when the files or handlers change, or at
//     Run.Reload, without a restart;
//   - an input published once every pipeline runs, the final outputs
//     read back, and the run ended once the input is processed (the
//     drained check).
//
// Package runtime is the host underneath, for programs that build
// pipelines and clients of their own; this package is the layer that
// knows files, brokers and telemetry (docs/run.md).
//
//	r, err := streamrun.Start(ctx, streamrun.Options{Files: []string{"pipeline.yaml"}})
//	if err != nil {
//		return err
//	}
//	return r.Wait() // until ctx ends, then a graceful stop
package streamrun
