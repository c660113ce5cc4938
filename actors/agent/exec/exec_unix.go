//go:build unix

package exec

import (
	osexec "os/exec"
	"syscall"
)

// setProcessGroup runs the program in its own process group and makes
// cancellation kill the whole group, so children of a shell script die with
// it instead of holding pipes open.
func setProcessGroup(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// os/exec calls Cancel only before Wait has reaped the leader,
		// so the group id cannot have been reused.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killGroup kills what is left of the program's process group once the
// leader has been reaped, such as a background child holding stdout. The
// group id stays reserved while any member lives. If none does, the kill
// fails with ESRCH, unless in the microseconds since reaping the id was
// reused by a new group leader, which pids cycling that fast makes
// negligible.
func killGroup(cmd *osexec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// termGroup asks the program's process group to stop (SIGTERM): a cancelled
// run's program gets a grace period before it is killed.
func termGroup(cmd *osexec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
}
