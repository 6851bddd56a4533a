package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/internal/buildinfo"
)

// mainVersion and mainCommit are set at link time by release builds
// (-ldflags "-X main.mainVersion=v1.2.3 -X main.mainCommit=...", see
// scripts/build-release), which may have no VCS information (a Docker
// build context without .git); otherwise the build info's are used.
var mainVersion, mainCommit string

// readVersion is this build of streamrun.
func readVersion() buildinfo.Info { return buildinfo.Read(mainVersion, mainCommit) }

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("version", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun version", pflag.ContinueOnError)
	output := fs.StringP("output", "o", "text", "text or json")
	if code, done := cmd.parse(fs, args, helpText("version")); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return cmd.fail(err)
	}
	v := readVersion()
	switch *output {
	case "text":
		fmt.Fprint(stdout, v)
	case "json":
		return cmd.printJSON(stdout, v)
	default:
		return cmd.fail(usagef("--output %q: want text or json", *output))
	}
	return exitOK
}
