package pipelinetest

import (
	"context"
	"errors"
)

// Summary is what running several test files came to.
type Summary struct {
	// Results are every case's, in the order they ran.
	Results []Result
	// Failed is how many of Results failed.
	Failed int
	// Invalid: a test file or the pipeline file it names is invalid (a
	// *FileError), so no case of it ran, or none after the problem.
	Invalid bool
	// Broken: a file's cases could not run for another reason.
	Broken bool
}

// RunFiles loads and runs the test files at paths one after the other,
// with o, as `streamrun test` does: report gets each case's result as it
// comes, fileError each file's error (a *FileError, FILE:LINE:COL lines,
// or another problem with the file's runs), and a file's error does not
// stop the next file. It stops between files once ctx is done. Either
// callback may be nil.
func RunFiles(ctx context.Context, paths []string, o Options, report func(Result), fileError func(path string, err error)) Summary {
	var s Summary
	for _, path := range paths {
		if ctx.Err() != nil {
			break
		}
		f, err := Load(path, o.LookupEnv)
		if err == nil {
			var rs []Result
			rs, err = f.Run(ctx, o, report)
			s.Results = append(s.Results, rs...)
		}
		if err == nil {
			continue
		}
		var fe *FileError
		if errors.As(err, &fe) {
			s.Invalid = true
		} else {
			s.Broken = true
		}
		if fileError != nil {
			fileError(path, err)
		}
	}
	for _, r := range s.Results {
		if !r.Passed() {
			s.Failed++
		}
	}
	return s
}
