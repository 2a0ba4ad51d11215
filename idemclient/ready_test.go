package idemclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestReadyWhenUnready: an unready server answers 503; Ready returns the
// *Error and still the reply, so the caller sees which check failed.
func TestReadyWhenUnready(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	quiet := slog.New(slog.DiscardHandler)
	engine, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := idemhttp.NewServer(engine, st, &idemhttp.Config{Logger: quiet,
		SchemaVersion: func(context.Context) (int, int, error) { return 3, 4, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var readyz atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			readyz.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	// The client's default retries (5xx are retried) do not apply to a
	// probe: one request, at once.
	cl, err := idemclient.New(hs.URL, &idemclient.Config{MaxRetries: 5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cl.Ready(ctx)
	if n := readyz.Load(); n != 1 {
		t.Errorf("Ready sent %d requests to an unready server, want 1", n)
	}
	var pe *idemclient.Error
	if !errors.As(err, &pe) || pe.Status != 503 {
		t.Fatalf("err %v, want a 503", err)
	}
	if r == nil || r.Status != "unhealthy" || r.Checks["schema"] == nil {
		t.Fatalf("reply %+v: the failing checks are lost", r)
	}
	var schema struct {
		Status string `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(r.Checks["schema"], &schema); err != nil || schema.Status != "unhealthy" || schema.Detail == "" {
		t.Fatalf("schema check %s: %v", r.Checks["schema"], err)
	}
	// Health (liveness) is still fine.
	if err := cl.Health(ctx); err != nil {
		t.Fatalf("healthz: %v", err)
	}
}

// TestUnavailableMapsToTheSentinel: the server's "storage unavailable"
// problem (503, after the client's retries) is idem.ErrUnavailable, so a
// caller can tell it from other failures; other 5xx are not.
func TestUnavailableMapsToTheSentinel(t *testing.T) {
	t.Parallel()
	f := &fault{n: 100, status: 503, retryAfter: "0",
		body: `{"type":"/problems/service-unavailable","title":"Storage unavailable","status":503,"detail":"the storage cannot be reached or written at the moment; retry later"}`}
	e := newAPI(t, f.wrap)
	cl := e.client("default", true, &idemclient.Config{MaxRetries: 1, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	_, err := cl.Enqueue(context.Background(), &idemclient.EnqueueRequest{Kind: "k"})
	if !errors.Is(err, idem.ErrUnavailable) || errors.Is(err, idem.ErrInvalid) {
		t.Fatalf("storage unavailable: %v", err)
	}
	if f.count() != 2 {
		t.Errorf("%d attempts, want 2 (a retry)", f.count())
	}
	internal := &idemclient.Error{Status: 500, Type: "/problems/internal", Title: "Internal error"}
	if errors.Is(internal, idem.ErrUnavailable) {
		t.Error("a 500 is ErrUnavailable")
	}
	unready := &idemclient.Error{Status: 503, Title: "Service Unavailable"} // /readyz: not a problem
	if errors.Is(unready, idem.ErrUnavailable) {
		t.Error("an unready node is ErrUnavailable")
	}
}
