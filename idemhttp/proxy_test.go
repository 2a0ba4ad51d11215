package idemhttp_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// dbProxy forwards connections to a real PostgreSQL while up; Down resets
// every forwarded connection and refuses new ones until Up, as when the
// network or the database server goes away and comes back.
type dbProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
	wg     sync.WaitGroup
}

func newDBProxy(t *testing.T, target string) *dbProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { p.Down(); p.ln.Close(); p.wg.Wait() })
	return p
}

func (p *dbProxy) serve() {
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
func (p *dbProxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Up forwards new connections again.
func (p *dbProxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// setupBehindProxy is setup over a PostgreSQL store (a fresh schema) whose
// every connection goes through a dbProxy, returned to cut the database
// away and bring it back.
func setupBehindProxy(t *testing.T) (*env, *dbProxy) {
	t.Helper()
	dbURL, schema := dbtest.NewSchema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newDBProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	e := setup(t, func(t *testing.T) store.Store {
		st, err := pgstore.Open(context.Background(), u.String(), &pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}, nil)
	return e, proxy
}
