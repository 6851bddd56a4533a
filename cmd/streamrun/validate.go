package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun"
	"github.com/streamrun/streamrun/runtime"
)

// runValidate checks pipeline files without a broker.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCmd("validate", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun validate", pflag.ContinueOnError)
	quiet := fs.BoolP("quiet", "q", false, "print nothing for valid files")
	handlers := fs.Bool("handlers", false, "also start each handler and hand it its config, as a run's start would")
	cache := fs.String("handler-cache", "", "with --handlers: where handlers given as a Go package are built and cached (default "+runtime.DefaultHandlerCacheDir()+")")
	if code, done := c.parse(fs, args, helpText("validate")); done {
		return code
	}
	if fs.NArg() == 0 {
		return c.fail(usagef("no file given"))
	}
	code := exitOK
	for _, path := range fs.Args() {
		f, err := streamrun.Check(ctx, path, os.LookupEnv)
		if err == nil && *handlers {
			err = streamrun.CheckHandlers(ctx, f, streamrun.CheckHandlersOptions{HandlerCache: *cache})
		}
		if err != nil {
			// Already FILE:LINE:COL: ... lines, without the command's
			// prefix, so that editors and terminals can jump to them.
			fmt.Fprintln(stderr, err)
			code = exitUsage
			continue
		}
		if !*quiet {
			names := make([]string, len(f.Pipelines))
			for i, p := range f.Pipelines {
				names[i] = p.Name
			}
			fmt.Fprintf(stdout, "%s: ok (%s)\n", path, strings.Join(names, ", "))
		}
	}
	return code
}
