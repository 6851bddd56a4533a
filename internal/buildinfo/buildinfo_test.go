package buildinfo

import (
	"runtime"
	"testing"
)

// What a release build stamps in wins; a test binary has the toolchain's
// version from its build info.
func TestReadPrefersTheStampedVersion(t *testing.T) {
	v := Read("v1.2.3", "abc123")
	if v.Version != "v1.2.3" || v.Commit != "abc123" || v.GoVersion != runtime.Version() {
		t.Errorf("Read = %+v", v)
	}
	if got := Read("", "").Version; got == "" {
		t.Error("no version at all; want devel or the module's")
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v1.0.0", Modified: true, GoVersion: "go1.26"}.String()
	if want := "streamrun v1.0.0\ncommit unknown (modified)\ngo1.26\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRelease(t *testing.T) {
	for v, want := range map[string]bool{"v1.2.3": true, "v0.1.0-rc1": true, "v1.2.3-beta.2": true, "devel": false,
		"v0.0.0-20260101000000-abcdefabcdef": false, "1.2.3": false} {
		if got := (Info{Version: v}).Release(); got != want {
			t.Errorf("%s: Release = %v, want %v", v, got, want)
		}
	}
}
