//go:build !unix

package exec

import (
	"fmt"
	osexec "os/exec"
)

// setProcessGroup keeps os/exec's default: cancellation kills the program
// only.
func setProcessGroup(*osexec.Cmd) {}

// killGroup does nothing: there is no process group to kill.
func killGroup(*osexec.Cmd) {}

// termGroup does nothing: the program gets EOF on stdin, then is killed
// after the grace period.
func termGroup(*osexec.Cmd) {}

// setUser fails: running a program as another user needs Unix.
func setUser(_ *osexec.Cmd, name string) error {
	return fmt.Errorf("exec: running programs as user %q needs Unix", name)
}

// LookupUser fails: running a program as another user needs Unix.
func LookupUser(name string) (*struct{}, error) {
	return nil, fmt.Errorf("exec: running programs as user %q needs Unix", name)
}
