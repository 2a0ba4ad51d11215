package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestHealthChecksUnhealthy: an unhealthy grade is GET /v1/health's 503
// (API.md); HealthChecks returns the report with an *Error of status 503.
func TestHealthChecksUnhealthy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	engine, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(engine, st, &idemhttp.Config{Logger: slog.New(slog.DiscardHandler),
		Health: idemhttp.HealthConfig{DeadJobs: idemhttp.HealthZero}}) // any dead job is unhealthy
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e := &apiEnv{t: t, st: st, url: hs.URL}
	cl := e.client("default", true, nil)
	if h, err := cl.HealthChecks(ctx); err != nil || h.Status != "healthy" {
		t.Fatalf("before a dead job: %+v %v", h, err)
	}
	if _, err := cl.Enqueue(ctx, &idemclient.EnqueueRequest{Kind: "k", Args: json.RawMessage(`{}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	jobs, err := cl.Claim(ctx, &idemclient.ClaimRequest{Queues: []string{"default"}, WorkerID: "w"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if _, err := cl.Fail(ctx, jobs[0].ID, jobs[0].LeaseToken, &idemclient.FailRequest{Error: "boom", NoRetry: true}); err != nil {
		t.Fatal(err)
	}
	h, err := cl.HealthChecks(ctx)
	var ie *idemclient.Error
	if !errors.As(err, &ie) || ie.Status != 503 {
		t.Fatalf("unhealthy: error %v, want an *Error of status 503", err)
	}
	if h == nil || h.Status != "unhealthy" || h.Checks["dead_jobs"].Status != "unhealthy" {
		t.Fatalf("unhealthy report: %+v", h)
	}
}
