package idemhttp

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// NewHTTPServer returns an http.Server for h (this Server's handler, or one
// that wraps it) with the limits of the Config: header size and header,
// body and idle timeouts. Its MaxHeaderBytes is Config.MaxHeaderBytes and
// a quarter: the Server's handler answers requests over the Config's limit
// with a 431 problem, and only those past that margin get net/http's own
// text/plain 431. Its Shutdown ends the long-polling claims of
// this Server at once (they answer {"jobs": []}) instead of letting them
// wait out their poll. Serve it on Listener(ln) to cap connections.
func (s *Server) NewHTTPServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		MaxHeaderBytes:    hardHeaderBytes(s.cfg.MaxHeaderBytes),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(s.Drain)
	return srv
}

// Drain ends the long-polling claims in flight and makes later claims
// return at once; http.Server.Shutdown calls it (see NewHTTPServer).
func (s *Server) Drain() { s.drain() }

// claimContext is the context of a claim: r's, ended also by Drain.
func (s *Server) claimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.draining, cancel)
	return ctx, func() { stop(); cancel() }
}

// Listener caps ln at Config.MaxConns open connections: Accept waits while
// that many are open, so a flood of connections (each may hold up to
// hardHeaderBytes of headers, a quarter over MaxHeaderBytes) cannot grow
// memory without bound.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return LimitListener(ln, s.cfg.MaxConns)
}

// LimitListener returns a Listener that accepts at most n simultaneous
// connections from ln.
func LimitListener(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// Accept waits for a free slot, then accepts.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

// Close closes the listener and wakes a waiting Accept.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn frees its slot once, when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
