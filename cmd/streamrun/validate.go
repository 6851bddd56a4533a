package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pipelines"
)

// runValidate checks pipeline files as `streamrun run` would before
// starting anything, without a broker.
func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("streamrun validate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.BoolP("quiet", "q", false, "print nothing for valid files")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: streamrun validate [flags] FILE...\n\n"+
			"Checks pipeline files without a broker: the YAML, every field's type\n"+
			"and value, ${VAR} expansion from the environment, topic names, patterns,\n"+
			"durations, and that each handler's binary, Go package directory or\n"+
			"script exists. Problems go to stderr as FILE:LINE:COL: field: problem.\n"+
			"Exit status: 0 all valid, 2 a file is not (or bad usage).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return validateUsage(stderr, "%v", err)
	}
	if fs.NArg() == 0 {
		return validateUsage(stderr, "no file given")
	}
	code := 0
	for _, path := range fs.Args() {
		f, err := pipelines.Load(path, os.LookupEnv)
		if err != nil {
			fmt.Fprintln(stderr, err)
			code = 2
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

func validateUsage(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "streamrun validate: "+format+"\n", a...)
	fmt.Fprintln(stderr, "Run 'streamrun validate --help' for usage.")
	return 2
}
