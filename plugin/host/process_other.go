//go:build !linux

package host

import "os/exec"

// dieWithParent does nothing outside Linux: there a plugin whose host was
// killed outright (SIGKILL) keeps running until something else ends it. A
// host that stops normally still stops its plugins (Instance.Close, Kill).
func dieWithParent(*exec.Cmd) {}
