package idemclient_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// exampleServer runs the API in-process on 127.0.0.1 over a temporary
// SQLite store (in production: `idem serve`) and returns a client with an
// admin key; stop shuts everything down. Examples have no *testing.T, so
// setup failures panic.
func exampleServer() (cl *idemclient.Client, stop func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "idemclient-example-")
	if err != nil {
		panic(err)
	}
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	engine, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: quiet})
	if err != nil {
		panic(err)
	}
	api, err := idemhttp.NewServer(engine, st, &idemhttp.Config{Logger: quiet})
	if err != nil {
		panic(err)
	}
	secret, key := idemhttp.NewAPIKey("default", true, "example", time.Now())
	if err := st.APIKeyCreate(ctx, key); err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	transport := &http.Transport{}
	cl, err = idemclient.New("http://"+ln.Addr().String(),
		&idemclient.Config{APIKey: secret, HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		panic(err)
	}
	return cl, func() {
		_ = srv.Shutdown(ctx)
		transport.CloseIdleConnections()
		st.Close()
		os.RemoveAll(dir)
	}
}
