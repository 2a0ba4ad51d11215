package idemhttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// tcpProxy forwards connections to a real PostgreSQL until cut: then the
// database is unreachable for the store behind it (connections reset, new
// ones refused), as when the network or the server goes away.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
	wg     sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
	}
}

// Cut closes the listener and every forwarded connection.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestPostgresUnreachableIs503: with the database gone, writes and reads
// answer 503 with Retry-After (a storage failure), never 500, and the Go
// library's error is ErrUnavailable.
func TestPostgresUnreachableIs503(t *testing.T) {
	t.Parallel()
	dbURL, schema := dbtest.NewSchema(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	e := setup(t, func(t *testing.T) store.Store {
		st, err := pgstore.Open(context.Background(), u.String(), &pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}, nil)
	id := e.enqueue(e.keyA, map[string]any{"kind": "k"}) // the key is verified and cached
	proxy.Cut()

	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"kind":"k"}`},
		{"GET", "/v1/jobs/" + id, ""},
		{"GET", "/v1/jobs?queue=default", ""},
		{"POST", "/v1/claim", `{"queues":["default"],"worker_id":"w"}`},
	} {
		r := e.req(c.method, c.path, e.keyA, bodyOrNil(c.body))
		expect(t, r, 503, "/problems/service-unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: 503 without Retry-After", c.method, c.path)
		}
	}
	_, err = e.client.EnqueueRaw(context.Background(), idem.EnqueueParams{Kind: "k"})
	if !errors.Is(err, idem.ErrUnavailable) {
		t.Fatalf("library enqueue with the database gone: %v, want ErrUnavailable", err)
	}
}
