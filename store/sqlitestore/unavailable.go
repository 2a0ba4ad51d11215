package sqlitestore

import (
	"errors"

	"modernc.org/sqlite"
)

// Primary SQLite result codes of storage failures.
const (
	codeNoMem    = 7
	codeReadOnly = 8
	codeIOErr    = 10
	codeFull     = 13
	codeCantOpen = 14
	codeTooBig   = 18
	codeMismatch = 20
)

// IsUnavailable implements store.FailureClassifier: the disk is full, the
// file cannot be written (read-only file or file system, an I/O error) or
// opened, or memory ran out.
func (s *Store) IsUnavailable(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff { // extended codes carry the primary code in the low byte
	case codeNoMem, codeReadOnly, codeIOErr, codeFull, codeCantOpen:
		return true
	}
	return false
}

// IsRefused implements store.RefusalClassifier: a string or blob is too big
// for SQLite, or a value has the wrong type. Retrying the same data fails
// again.
func (s *Store) IsRefused(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case codeTooBig, codeMismatch:
		return true
	}
	return false
}
