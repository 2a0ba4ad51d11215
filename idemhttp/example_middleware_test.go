package idemhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// Guard any handler of your own with the Idempotency-Key semantics: a
// retried payment request is answered from the stored response instead of
// charging twice.
func ExampleMiddleware() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "idem.db"), nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()

	charges := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":%d}`, charges)
	})
	mw := idemhttp.Middleware(st, &idemhttp.MiddlewareConfig{Required: true})
	srv := httptest.NewServer(mw(pay))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest("POST", srv.URL+"/pay", strings.NewReader(`{"amount":100}`))
		req.Header.Set("Idempotency-Key", "order-42")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Println(res.StatusCode, string(body), "replayed:", res.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201 {"charge":1} replayed: false
	// 201 {"charge":1} replayed: true
	// charges: 1
}
