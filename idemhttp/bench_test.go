package idemhttp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// BenchmarkEnqueueHandler serves POST /v1/jobs with a new Idempotency-Key
// per request through the whole handler chain (request id, CORS, metrics,
// auth, decoding, the client, the SQLite store with durable commits,
// encoding) without a socket: what the server spends besides net/http.
// Parallel, so that the store's group commit batches as under load.
func BenchmarkEnqueueHandler(b *testing.B) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "idem.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	// No access log, as in `idem bench-http`: a line per request would
	// measure the log's writer.
	logger := slog.New(slog.DiscardHandler)
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	server, err := idemhttp.NewServer(client, st, &idemhttp.Config{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	secret, k := idemhttp.NewAPIKey(idem.DefaultTenant, true, "bench", time.Now())
	if err := st.APIKeyCreate(ctx, k); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := strconv.FormatInt(next.Add(1), 10)
			r := httptest.NewRequest(http.MethodPost, "/v1/jobs",
				strings.NewReader(`{"kind":"bench","queue":"bench","args":{"i":`+i+`}}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+secret)
			r.Header.Set("Idempotency-Key", "new-"+i)
			w := httptest.NewRecorder()
			server.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
}
