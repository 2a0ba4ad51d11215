//go:build unix

package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockProcess takes an exclusive, non-blocking lock on path+"-idem.lock"
// and returns the held file; nil when another open Store (in this or
// another process) holds it. The lock ends with the process, so a crashed
// process never leaves it behind.
//
// Holding it does not mean that no other Store has the file open: a Store
// opened while another held this lock keeps the file open without it, and
// outlives the holder. What says that is lockOpenFiles.
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

// lockOpenFiles announces that a Store has the database at path open: it
// takes a flock on path+"-idem-open.lock" and returns the held file, which
// the Store keeps until it has closed its connections. Every Store holds
// the lock shared, so an exclusive lock on it can be had only when no other
// Store, in this process or another, has the database open (flock locks
// belong to an open file description: two Stores of one process conflict
// as two processes do), and the kernel drops the lock of a process that
// ends, however it ends.
//
// With tryExclusive it first tries for the exclusive lock and reports
// whether it got it (the caller then downgrades with shareOpenFiles once it
// is done); otherwise, or when another Store has the file open, it takes
// the lock shared. A shared lock waits while another Store holds the lock
// exclusively (a takeover, one short write transaction), until ctx ends or
// wait has passed.
//
// The error wraps errOpenFilesUnlocked when the lock file cannot be opened
// or the file system has no flock: the Store is then not announced (the
// caller may go on without a takeover); where flock is missing, no Store on
// that file can take the exclusive lock either.
func lockOpenFiles(ctx context.Context, path string, tryExclusive bool, wait time.Duration) (f *os.File, exclusive bool, err error) {
	name := path + "-idem-open.lock"
	f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", errOpenFilesUnlocked, err)
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		if tryExclusive {
			err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				return f, true, nil
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				f.Close()
				return nil, false, fmt.Errorf("%w: %s: %w", errOpenFilesUnlocked, name, err)
			}
		}
		err = flock(f, syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return f, false, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, false, fmt.Errorf("%w: %s: %w", errOpenFilesUnlocked, name, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, false, fmt.Errorf("sqlitestore: %s: another Store has held the lock exclusively for more than %v", name, wait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, false, fmt.Errorf("sqlitestore: %s: waiting for another Store's leader takeover: %w", name, ctx.Err())
		case <-time.After(pause):
		}
	}
}

// shareOpenFiles turns the exclusive lock lockOpenFiles took into a shared
// one.
func shareOpenFiles(f *os.File) error {
	if err := flock(f, syscall.LOCK_SH); err != nil {
		return fmt.Errorf("sqlitestore: %s: share the lock: %w", f.Name(), err)
	}
	return nil
}

// flock is syscall.Flock, retried when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
