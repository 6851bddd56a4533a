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

const validateHelp = `Usage: streamrun validate [flags] FILE...

Checks pipeline files as 'streamrun run' does before it starts anything,
without a broker: the YAML, every field's type and value, ${VAR}
expansion from the environment, topic names, patterns, durations, and
that each handler's binary, Go package directory, script and Python
exist, and that a script handler's Python imports the streamrun SDK. A
valid file is reported on stdout as "FILE: ok (its pipelines)";
each problem goes to stderr as FILE:LINE:COL: field: what is wrong.
Each file is checked on its own. docs/pipelines.md describes the format.

With --handlers it also starts each handler once (a Go package built
first, into the cache 'streamrun run' uses), hands it its config and
closes it, still without a broker: a config the handler refuses (a typo
in one of its keys, say) is reported at the pipeline's handler.config, a
handler that does not build or start at its plugin, package or script.

Exit status: 0 every file is valid, 2 one is not (or bad usage).
`

// runValidate checks pipeline files without a broker.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCmd("validate", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun validate", pflag.ContinueOnError)
	quiet := fs.BoolP("quiet", "q", false, "print nothing for valid files")
	handlers := fs.Bool("handlers", false, "also start each handler and hand it its config, as a run's start would")
	cache := fs.String("handler-cache", "", "with --handlers: where handlers given as a Go package are built and cached (default "+runtime.DefaultHandlerCacheDir()+")")
	if code, done := c.parse(fs, args, validateHelp); done {
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
