//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package natsembed

import "os"

// tryLock has no flock to use here: the data directory is not protected
// against a second server on this platform.
func tryLock(*os.File) (bool, error) { return true, nil }

func unlock(*os.File) error { return nil }
