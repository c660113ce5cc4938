//go:build !unix

package agent

import "os/exec"

// setProcessGroup keeps os/exec's default: cancellation kills the program
// only.
func setProcessGroup(*exec.Cmd) {}

// killGroup does nothing: there is no process group to kill.
func killGroup(*exec.Cmd) {}

// termGroup does nothing: the program gets EOF on stdin, then is killed
// after the grace period.
func termGroup(*exec.Cmd) {}
