//go:build !linux

package host

import "os/exec"

// dieWithParent does nothing outside Linux: there a plugin whose host was
// killed outright (SIGKILL) keeps running until something else ends it. A
// host that stops normally still stops its plugins (Instance.Close, Kill).
func dieWithParent(*exec.Cmd) {}

// exitedAlready cannot tell outside Linux without reaping the child: a
// stop there is taken as the host's (its log record may say so of a
// plugin that had just died by itself).
func exitedAlready(int) bool { return false }
