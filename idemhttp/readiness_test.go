package idemhttp_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// readyStatus returns the status of /readyz and its "writes" check.
func (e *env) readyStatus() (int, string) {
	e.t.Helper()
	r := e.req("GET", "/readyz", "", nil)
	checks, _ := r.json(e.t)["checks"].(map[string]any)
	w, _ := checks["writes"].(map[string]any)
	s, _ := w["status"].(string)
	return r.status, s
}

// TestReadyzPostgresWrites: with the database cut, /readyz answers 503
// (the write probe fails); once it is back, a write that failed within the
// window keeps the node unready until a write succeeds again.
func TestReadyzPostgresWrites(t *testing.T) {
	t.Parallel()
	e, proxy := setupBehindProxy(t)
	e.enqueue(e.keyA, map[string]any{"kind": "k"}) // the key is verified and cached
	if code, w := e.readyStatus(); code != 200 || w != "healthy" {
		t.Fatalf("before the cut: %d %s", code, w)
	}

	proxy.Down()
	expect(t, e.req("POST", "/v1/jobs", e.keyA, map[string]any{"kind": "k"}), 503, "/problems/service-unavailable")
	if code, w := e.readyStatus(); code != 503 || w != "unhealthy" {
		t.Fatalf("database cut: %d %s, want 503 unhealthy", code, w)
	}

	proxy.Up()
	if code, w := e.readyStatus(); code != 503 || w != "unhealthy" {
		t.Fatalf("database back, the failed write within the window: %d %s, want 503 unhealthy", code, w)
	}
	e.enqueue(e.keyA, map[string]any{"kind": "k"})
	if code, w := e.readyStatus(); code != 200 || w != "healthy" {
		t.Fatalf("a write succeeded again: %d %s, want 200 healthy", code, w)
	}
}

// TestReadyzSQLiteWrites: while another process holds the write lock of the
// database file, the write probe cannot write and /readyz answers 503; it
// answers 200 again once the lock is released.
func TestReadyzSQLiteWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "idem.db")
	e := setup(t, func(t *testing.T) store.Store {
		st, err := sqlitestore.Open(context.Background(), path, &sqlitestore.Config{BusyTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}, nil)
	if code, w := e.readyStatus(); code != 200 || w != "healthy" {
		t.Fatalf("writable: %d %s", code, w)
	}

	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if code, w := e.readyStatus(); code != 503 || w != "unhealthy" {
		t.Fatalf("write lock held elsewhere: %d %s, want 503 unhealthy", code, w)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if code, w := e.readyStatus(); code != 200 || w != "healthy" {
		t.Fatalf("lock released: %d %s, want 200 healthy", code, w)
	}
}
