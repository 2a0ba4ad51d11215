//go:build !unix

package sqlitestore

import (
	"context"
	"os"
	"time"
)

// lockProcess is not available here: a new process waits out the previous
// leader's term.
func lockProcess(string) *os.File { return nil }

// lockOpenFiles is not available here either: no Store can tell that no
// other Store has the database open, so none clears the leader rows, and
// leadership passes when the old term expires (always correct, only
// slower after a restart).
func lockOpenFiles(context.Context, string, bool, time.Duration) (*os.File, bool, error) {
	return nil, false, nil
}

// shareOpenFiles is never called here (lockOpenFiles never locks).
func shareOpenFiles(*os.File) error { return nil }

// writeGate is not available here: SQLite's busy handler alone decides
// which writer goes next.
type writeGate struct{}

func openWriteGate(string) *writeGate         { return nil }
func (g *writeGate) enter(time.Duration) bool { return false }
func (g *writeGate) leave()                   {}
func (g *writeGate) close()                   {}
