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
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cl, err := idemclient.New(hs.URL, &idemclient.Config{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cl.Ready(ctx)
	var pe *idemclient.Error
	if !errors.As(err, &pe) || pe.Status != 503 {
		t.Fatalf("err %v, want a 503", err)
	}
	if r == nil || r.Status != "unready" || r.Checks["schema"] == nil {
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
