package host

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel SIGKILL the child when its parent thread
// dies, so a plugin never outlives a host that was killed (even with
// SIGKILL). See process for why the forking thread outlives the child.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
