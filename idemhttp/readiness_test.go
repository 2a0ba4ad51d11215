package idemhttp_test

import (
	"context"
	"database/sql"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// switchProxy forwards connections to a real PostgreSQL while up; Down
// resets every forwarded connection and refuses new ones until Up.
type switchProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
	wg     sync.WaitGroup
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { p.Down(); p.ln.Close(); p.wg.Wait() })
	return p
}

func (p *switchProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
	}
}

// Down closes every forwarded connection and refuses new ones.
func (p *switchProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Up forwards new connections again.
func (p *switchProxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

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
	dbURL, schema := dbtest.NewSchema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newSwitchProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	e := setup(t, func(t *testing.T) store.Store {
		st, err := pgstore.Open(context.Background(), u.String(), &pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}, nil)
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
