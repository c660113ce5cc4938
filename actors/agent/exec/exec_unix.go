//go:build unix

package exec

import (
	"fmt"
	"os"
	osexec "os/exec"
	"os/user"
	"strconv"
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

// setUser makes the program run as name (a user name or a numeric uid),
// with its primary group and no supplementary groups.
func setUser(cmd *osexec.Cmd, name string) error {
	cred, err := LookupUser(name)
	if err != nil {
		return err
	}
	cmd.SysProcAttr.Credential = cred
	return nil
}

// LookupUser resolves the user an exec agent's program is to run as
// (serve --exec-user): a name or a numeric uid. It fails unless this
// process runs as root, as only root may start a process as another user.
func LookupUser(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("exec: running programs as user %q needs root; artifactr runs as uid %d", name, os.Geteuid())
	}
	u, err := user.Lookup(name)
	if err != nil {
		var uerr error
		if u, uerr = user.LookupId(name); uerr != nil {
			return nil, fmt.Errorf("exec: user %q: %w", name, err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("exec: user %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("exec: user %q: gid %q: %w", name, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
