//go:build !unix

package exec

import osexec "os/exec"

// setProcessGroup keeps os/exec's default: cancellation kills the program
// only.
func setProcessGroup(*osexec.Cmd) {}

// killGroup does nothing: there is no process group to kill.
func killGroup(*osexec.Cmd) {}

// termGroup does nothing: the program gets EOF on stdin, then is killed
// after the grace period.
func termGroup(*osexec.Cmd) {}
