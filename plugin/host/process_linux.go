package host

import (
	"errors"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
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

// exitedAlready reports whether the child pid has ended (a zombie not yet
// reaped, or reaped), without reaping it.
func exitedAlready(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if errors.Is(err, unix.ECHILD) {
		return true // reaped already
	}
	// With WNOHANG, a child that has not changed state leaves info zero.
	return err == nil && info.Signo != 0
}
