// Package pipelinetest is `streamrun test` without its flags: it reads
// test files (YAML, by the pipeline loader's rules: FILE:LINE:COL errors,
// unknown fields with the one meant) and runs their cases. Each case
// starts an in-memory embedded broker of its own, runs the pipelines the
// file names through streamrun.Start with their real handler processes,
// seeds their keyed state, publishes its inputs, does its faults (a
// crashed, hung or garbling handler, through runtime.Options.Intercept),
// and checks each input's outcome, the outputs per topic and the state
// after, saying what differs as -want +got lines. docs/testing.md
// describes the format; docs/pipelinetest.schema.json is its JSON Schema.
//
//	f, err := pipelinetest.Load("orders_test.yaml", nil)
//	if err != nil {
//		return err // a *FileError: FILE:LINE:COL lines
//	}
//	results, err := f.Run(ctx, pipelinetest.Options{}, func(r pipelinetest.Result) {
//		pipelinetest.WriteResult(os.Stdout, r)
//	})
package pipelinetest
