//go:build !unix

package sqlitestore

import "os"

// lockProcess is not available here: a new process waits out the previous
// leader's term.
func lockProcess(string) *os.File { return nil }
