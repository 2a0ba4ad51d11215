// Package filetemplate gives tests copies of a file that is expensive to
// make, made once per test process: a database file already at the current
// schema, so that a test does not run every migration again on a new file.
//
// It does not know what the file holds (it imports no store), so a store's
// own in-package tests can use it as well as the packages that import the
// store.
package filetemplate

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Template is a file made once, on first use, by a function and then kept
// in memory; each Copy writes it out to a new file. Its methods are safe
// for concurrent use.
type Template struct {
	create func(path string) error
	// extra are suffixes of companion files (for a SQLite database in WAL
	// mode, "-wal") that must not be left behind by create: a copy of the
	// main file alone would miss what they hold.
	extra []string

	once sync.Once
	data []byte
	err  error
}

// New returns a Template made, on first use, by create, which must make
// the file at path (in a directory of its own that is removed afterwards)
// and leave everything in that one file: Copy fails when a file named path
// plus one of mustNotRemain exists and is not empty after create returns.
func New(create func(path string) error, mustNotRemain ...string) *Template {
	return &Template{create: create, extra: mustNotRemain}
}

// build makes the template once and keeps its bytes.
func (tp *Template) build() ([]byte, error) {
	tp.once.Do(func() {
		dir, err := os.MkdirTemp("", "filetemplate-")
		if err != nil {
			tp.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "template")
		if err := tp.create(path); err != nil {
			tp.err = fmt.Errorf("make template: %w", err)
			return
		}
		for _, suffix := range tp.extra {
			if fi, err := os.Stat(path + suffix); err == nil && fi.Size() > 0 {
				tp.err = fmt.Errorf("make template: %s left %d bytes in %q; a copy of the main file would miss them", path, fi.Size(), suffix)
				return
			}
		}
		tp.data, tp.err = os.ReadFile(path)
	})
	return tp.data, tp.err
}

// Copy writes a copy of the template, mode 0600, to a new file name in
// t.TempDir() and returns its path. The first call makes the template;
// when that fails, every call fails t.
func (tp *Template) Copy(t testing.TB, name string) string {
	t.Helper()
	data, err := tp.build()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
