package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/pflag"
)

// mainVersion and mainCommit are set at link time by release builds
// (-ldflags "-X main.mainVersion=v1.2.3 -X main.mainCommit=...", see
// scripts/build-release), which may have no VCS information (a Docker
// build context without .git); otherwise the build info's are used.
var mainVersion, mainCommit string

// buildVersion is what `streamrun version` reports.
type buildVersion struct {
	Version   string `json:"version"`    // module version, or "devel"
	Commit    string `json:"commit"`     // VCS revision, "" when unknown
	Modified  bool   `json:"modified"`   // built from a modified work tree
	GoVersion string `json:"go_version"` // the toolchain that built it
}

// readVersion reads the version from the build info.
func readVersion() buildVersion {
	v := buildVersion{Version: "devel"}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		v.GoVersion = bi.GoVersion
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if mainVersion != "" {
		v.Version = mainVersion
	}
	if mainCommit != "" {
		v.Commit = mainCommit
	}
	return v
}

func (v buildVersion) String() string {
	commit := v.Commit
	if commit == "" {
		commit = "unknown"
	}
	if v.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("streamrun %s\ncommit %s\n%s\n", v.Version, commit, v.GoVersion)
}

const versionHelp = `Usage: streamrun version [--output text|json]

Prints the module version (or "devel" for a build from a work tree), the
commit it was built from and the Go version that built it, read from the
binary's build info.
`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("version", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun version", pflag.ContinueOnError)
	output := fs.StringP("output", "o", "text", "text or json")
	if code, done := cmd.parse(fs, args, versionHelp); done {
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
