//go:build unix

package sqlitestore

import (
	"path/filepath"
	"testing"
	"time"
)

// TestWriteGateTakesTurns: a gate held by another Store (another open file
// description, as another process) is waited for; a wait that times out
// goes on without it, and the attempt left blocked releases the gate as
// soon as it gets it, so the holder can take it again; a later enter of
// the abandoned side adopts or restarts the attempt and gets the gate.
func TestWriteGateTakesTurns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	a, b := openWriteGate(path), openWriteGate(path)
	defer a.close()
	defer b.close()
	if !a.enter(time.Second) {
		t.Fatal("a free gate was not taken")
	}
	if b.enter(20 * time.Millisecond) {
		t.Fatal("b took the gate a holds")
	}
	a.leave()
	// b's abandoned attempt gets the gate and must give it back at once.
	deadline := time.Now().Add(time.Minute)
	for !a.enter(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned attempt kept the gate")
		}
	}
	done := make(chan bool, 1)
	go func() { done <- b.enter(time.Minute) }()
	a.leave()
	if !<-done {
		t.Fatal("b did not get the gate after a left")
	}
	b.leave()
}
