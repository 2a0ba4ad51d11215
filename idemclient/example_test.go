package idemclient_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// A Go program enqueues over HTTP and works jobs as a pull worker. Here the
// server runs in-process on 127.0.0.1 with a temporary SQLite store; in
// production it is `idem serve`.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idemclient-example-")
	defer os.RemoveAll(dir)
	st, _ := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	defer st.Close()
	engine, _ := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
	api, _ := idemhttp.NewServer(engine, st, nil)
	secret, key := idemhttp.NewAPIKey("default", true, "example", time.Now())
	_ = st.APIKeyCreate(ctx, key)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown(ctx)

	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	cl, _ := idemclient.New("http://"+ln.Addr().String(),
		&idemclient.Config{APIKey: secret, HTTPClient: &http.Client{Transport: transport}})

	// The same idempotency key twice: one job; the second answer is a replay.
	req := &idemclient.EnqueueRequest{Queue: "thumbs", Kind: "resize",
		Args: json.RawMessage(`{"image":"cat.png"}`), IdempotencyKey: "upload-42"}
	first, _ := cl.Enqueue(ctx, req)
	again, _ := cl.Enqueue(ctx, req)
	fmt.Println(first.Job.State, again.Job.ID == first.Job.ID, again.Replayed)

	// A pull worker claims the job and completes it with its lease token.
	jobs, _ := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"thumbs"}, WorkerID: "w1"})
	done, _ := cl.Complete(ctx, jobs[0].ID, jobs[0].LeaseToken, json.RawMessage(`{"width":64}`))
	fmt.Println(done.State, string(done.Result))
	// Output:
	// available true true
	// completed {"width":64}
}
