package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pipelinetest"
	"github.com/streamrun/streamrun/runtime"
)

// runTest runs test files' cases.
func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCmd("test", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun test", pflag.ContinueOnError)
	junit := fs.String("junit", "", "also write the results as JUnit XML to this file, for CI systems")
	runRE := fs.String("run", "", "run only the cases whose names match this regular expression")
	cache := fs.String("handler-cache", "", "where handlers given as a Go package are built and cached (default "+runtime.DefaultHandlerCacheDir()+")")
	var logs logFlags
	logs.register(fs, "log what each case's broker and host do, to stderr")
	if code, done := c.parse(fs, args, helpText("test")); done {
		return code
	}
	o := pipelinetest.Options{HandlerCache: *cache}
	if *runRE != "" {
		re, err := regexp.Compile(*runRE)
		if err != nil {
			return c.fail(usagef("--run: %v", err))
		}
		o.Run = re
	}
	if logs.verbose {
		log, err := logs.logger(stderr, logs.level())
		if err != nil {
			return c.fail(err)
		}
		o.Logger = log
	} else if _, err := logs.logger(io.Discard, logs.level()); err != nil {
		return c.fail(err)
	}
	files, err := pipelinetest.Find(fs.Args())
	if err != nil {
		return c.fail(usagef("%v", err))
	}
	sum := pipelinetest.RunFiles(ctx, files, o, func(r pipelinetest.Result) { pipelinetest.WriteResult(stdout, r) },
		func(path string, err error) {
			var fe *pipelinetest.FileError
			if errors.As(err, &fe) {
				// FILE:LINE:COL lines, without the command's prefix, so
				// that editors and terminals can jump to them.
				fmt.Fprintln(stderr, err)
			} else {
				fmt.Fprintf(stderr, "%s: %v\n", path, err)
			}
		})
	results, failed := sum.Results, sum.Failed
	if *junit != "" {
		if err := pipelinetest.WriteJUnitFile(*junit, results); err != nil {
			return c.fail(fmt.Errorf("--junit: %w", err))
		}
	}
	switch {
	case ctx.Err() != nil:
		return c.interrupted()
	case sum.Invalid:
		fmt.Fprintf(stdout, "FAIL (a test or pipeline file is invalid; %d of %d cases run failed)\n", failed, len(results))
		return exitUsage
	case failed > 0 || sum.Broken:
		fmt.Fprintf(stdout, "FAIL (%d of %d cases failed)\n", failed, len(results))
		return exitFailed
	}
	fmt.Fprintf(stdout, "PASS (%s)\n", plural(int64(len(results)), "case"))
	return exitOK
}
