package idem_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/key"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// Do runs a function at most once per key while its result is cached: the
// second call returns the cached result without running the function.
func ExampleClient_Do() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "idem-example-")
	defer os.RemoveAll(dir)
	st, _ := sqlitestore.Open(ctx, filepath.Join(dir, "idem.db"), nil)
	defer st.Close()
	client, _ := idem.NewClient(st, nil)

	k, _ := key.Prefixed("buffer", []byte(`{"layer":"parcels","distance":250.0}`))
	calls := 0
	area := func(ctx context.Context) (any, error) {
		calls++
		return map[string]float64{"area_m2": 196349.5}, nil
	}
	first, _ := client.Do(ctx, k, area, nil)
	second, _ := client.Do(ctx, k, area, nil)
	fmt.Println(string(first.Result), first.WasCached)
	fmt.Println(string(second.Result), second.WasCached, "calls:", calls)
	// Output:
	// {"area_m2":196349.5} false
	// {"area_m2":196349.5} true calls: 1
}
