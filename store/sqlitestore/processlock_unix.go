//go:build unix

package sqlitestore

import (
	"os"
	"syscall"
)

// lockProcess takes an exclusive, non-blocking lock on path+"-idem.lock"
// and returns the held file; nil when another open Store (in this or
// another process) holds it. The lock ends with the process, so a crashed
// process never leaves it behind.
func lockProcess(path string) *os.File {
	f, err := os.OpenFile(path+"-idem.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}
