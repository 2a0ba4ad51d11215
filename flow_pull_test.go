package idem_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
)

// startFlowPullers serves the API of c (on st) on a loopback port and runs
// one pull worker per tenant over HTTP beside the worker processes of
// TestFlowControlThreeProcesses: each claims up to 2 jobs, keeps the same
// ledger as the processes' handlers (flowStart, flowEnd) and completes them,
// failing the first attempt of every seventh job as they do, and call
// changed after each change of the ledger. The workers
// and the server stop at cleanup; errors other than the stop go to t.
func startFlowPullers(t *testing.T, c *idem.Client, st store.Store, ledger string, tenants []string, changed func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	api, err := idemhttp.NewServer(c, st, &idemhttp.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	secret, key := idemhttp.NewAPIKey("default", true, "flow", time.Now())
	if err := st.APIKeyCreate(ctx, key); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	transport := &http.Transport{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		api.Drain()
		_ = srv.Shutdown(context.Background())
		transport.CloseIdleConnections()
	})
	for _, tenant := range tenants {
		cl, err := idemclient.New("http://"+ln.Addr().String(), &idemclient.Config{APIKey: secret, Tenant: tenant,
			HTTPClient: &http.Client{Transport: transport}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := flowPull(ctx, cl, c, ledger, "pull-"+tenant, changed); err != nil && ctx.Err() == nil {
				t.Errorf("pull worker of %s: %v", tenant, err)
			}
		}()
	}
}

// flowPull claims and works jobs of flowQueue until ctx ends.
func flowPull(ctx context.Context, cl *idemclient.Client, c *idem.Client, ledger, worker string, changed func()) error {
	for ctx.Err() == nil {
		jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{flowQueue}, WorkerID: worker,
			Limit: 2, Wait: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		for _, j := range jobs {
			id, err := strconv.ParseInt(j.ID, 10, 64)
			if err != nil {
				return err
			}
			row := &idem.JobRow{ID: id, Attempt: j.Attempt, Tenant: j.Tenant, StartedAt: j.StartedAt, WorkerID: j.WorkerID}
			if _, err := flowStart(ctx, ledger, c, row); err != nil {
				return err
			}
			changed()
			retry := j.Attempt == 1 && id%7 == 0
			if err := flowEnd(ledger, row, !retry); err != nil {
				return err
			}
			changed()
			if retry {
				after := time.Millisecond
				_, err = cl.Fail(ctx, j.ID, j.LeaseToken, &idemclient.FailRequest{Error: "first attempt fails", RetryAfter: &after})
			} else {
				_, err = cl.Complete(ctx, j.ID, j.LeaseToken, nil)
			}
			if err != nil {
				return fmt.Errorf("finish job %s: %w", j.ID, err)
			}
		}
	}
	return nil
}
