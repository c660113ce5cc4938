//go:build !unix

package exec

import osexec "os/exec"

// setProcessGroup keeps os/exec's default: cancellation kills the program
// only.
func setProcessGroup(*osexec.Cmd) {}

// killGroup does nothing: there is no process group to kill.
func killGroup(*osexec.Cmd) {}
