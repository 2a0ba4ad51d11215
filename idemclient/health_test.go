package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
)

// TestHealthChecksUnhealthy: an unhealthy grade is GET /v1/health's 503
// (API.md); HealthChecks returns the report with an *Error of status 503.
func TestHealthChecksUnhealthy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newAPIWith(t, &idemhttp.Config{Health: idemhttp.HealthConfig{DeadJobs: idemhttp.HealthZero}}, nil) // any dead job is unhealthy
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
