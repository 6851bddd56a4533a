package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/scaffold"
)

const newHelp = `Usage: streamrun new handler NAME --lang go|python [flags]

Writes a ready handler project into DIR (default ./NAME): the handler,
its unit tests on the SDK's test kit, a pipeline file that runs it
(NAME-in to NAME-out), its cases for 'streamrun test'
(pipeline_test.yaml), an input file and a README with the commands to
test, validate and run it. For Go, a module that builds as written (its
go.sum filled by 'go mod tidy', from the module cache or GOPROXY); for
Python, a script with its requirements.txt. docs/new.md describes them.

NAME is lower-case letters, digits and dashes. DIR must not exist, or be
an empty directory: nothing is overwritten, and nothing is left behind
on an error.

The project depends on streamrun's SDK from a checkout of streamrun:
--sdk DIR, by default the checkout the current directory is in. The Go
module gets a replace line pointing there, the requirements a pip
requirement on its sdk/python. A release build of streamrun, outside a
checkout, requires its own release instead.

Subcommands:
  handler   a handler project in Go or Python

Exit status: 0 written, 1 failed (go mod tidy, a write), 2 bad usage (a
bad NAME or --lang, DIR not empty, no SDK to depend on).
`

func runNew(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCmd("new", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun new", pflag.ContinueOnError)
	lang := fs.String("lang", "", "the handler's language: go or python (required)")
	dir := fs.String("dir", "", "where the project goes (default ./NAME); must not exist, or be empty")
	sdk := fs.String("sdk", "", "a streamrun checkout to use the SDK from (default: the checkout the current directory is in)")
	module := fs.String("module", "", "the Go module path (default NAME); Go only")
	if code, done := c.parse(fs, args, newHelp); done {
		return code
	}
	switch {
	case fs.NArg() == 0:
		return c.fail(usagef("what to make: streamrun new handler NAME --lang go|python"))
	case fs.Arg(0) != "handler":
		return c.fail(usagef("unknown kind %q: streamrun new makes a handler (streamrun new handler NAME)", fs.Arg(0)))
	case fs.NArg() == 1:
		return c.fail(usagef("no handler name given: streamrun new handler NAME --lang go|python"))
	case fs.NArg() > 2:
		return c.fail(usagef("unexpected arguments: %s", strings.Join(fs.Args()[2:], " ")))
	}
	if *module != "" && *lang != "go" {
		return c.fail(usagef("--module is for --lang go"))
	}
	o := scaffold.Options{Name: fs.Arg(1), Lang: *lang, Dir: *dir, SDK: *sdk, Module: *module}
	if o.SDK == "" {
		wd, err := os.Getwd()
		if err == nil {
			o.SDK, _ = scaffold.FindSDK(wd)
		}
	}
	if o.SDK == "" {
		if v := readVersion(); v.Release() {
			o.Version = v.Version
		}
	}
	files, err := scaffold.New(ctx, o)
	if err != nil {
		if errors.Is(err, scaffold.ErrUsage) {
			return c.fail(usagef("%s", strings.TrimPrefix(err.Error(), scaffold.ErrUsage.Error()+": ")))
		}
		return c.fail(err)
	}
	where := o.Dir
	if where == "" {
		where = o.Name
	}
	fmt.Fprintf(stdout, "wrote %s (%s, SDK %s):\n", where, o.Lang, sdkFrom(o))
	for _, f := range files {
		fmt.Fprintf(stdout, "  %s\n", filepath.Join(where, f))
	}
	fmt.Fprintf(stdout, "Next: cd %s, then the commands in README.md.\n", where)
	return exitOK
}

// sdkFrom says where the project's SDK comes from.
func sdkFrom(o scaffold.Options) string {
	if o.SDK != "" {
		return "from " + o.SDK
	}
	return o.Version
}
