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

func runNew(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCmd("new", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun new", pflag.ContinueOnError)
	lang := fs.String("lang", "", "the handler's language: go or python (required)")
	dir := fs.String("dir", "", "where the project goes (default ./NAME); must not exist, or be empty")
	sdk := fs.String("sdk", "", "a streamrun checkout to use the SDK from (default: the checkout the current directory is in)")
	module := fs.String("module", "", "the Go module path (default NAME); Go only")
	if code, done := c.parse(fs, args, helpText("new")); done {
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
