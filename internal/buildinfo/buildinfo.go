// Package buildinfo says which build of streamrun is running: the
// module version, the commit and the Go toolchain, from the binary's
// build info or what a release build stamped in at link time
// (scripts/build-release). `streamrun version` prints it, `streamrun
// bench` records it with its figures and `streamrun new` picks the SDK
// release a project requires by it.
package buildinfo

import (
	"fmt"
	"regexp"
	"runtime/debug"
)

// Info is a build of streamrun.
type Info struct {
	Version   string `json:"version"`    // module version, or "devel"
	Commit    string `json:"commit"`     // VCS revision, "" when unknown
	Modified  bool   `json:"modified"`   // built from a modified work tree
	GoVersion string `json:"go_version"` // the toolchain that built it
}

// Read reads the build info; version and commit, when not "", are what
// a release build stamped in and win over it (a build without VCS
// information, as from a Docker build context without .git, has none).
func Read(version, commit string) Info {
	v := Info{Version: "devel"}
	if bi, ok := debug.ReadBuildInfo(); ok {
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
	if version != "" {
		v.Version = version
	}
	if commit != "" {
		v.Commit = commit
	}
	return v
}

// String is the three lines `streamrun version` prints: version, commit
// ("unknown", "(modified)" after it), Go version.
func (v Info) String() string {
	commit := v.Commit
	if commit == "" {
		commit = "unknown"
	}
	if v.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("streamrun %s\ncommit %s\n%s\n", v.Version, commit, v.GoVersion)
}

// releaseVersion is a release's module version.
var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-(alpha|beta|rc)[0-9.]*)?$`)

// Release reports whether v is a release (not "devel", nor a
// pseudo-version of a work tree's commit).
func (v Info) Release() bool { return releaseVersion.MatchString(v.Version) }
