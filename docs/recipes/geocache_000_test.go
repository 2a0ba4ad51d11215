package recipes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
)

// Seed 000, the geoprocessing result cache: the key is the SHA-256 of the
// process and its inputs, so two jobs with the same inputs share one result
// (the second is served from the cache with the original's duration); a
// failed run is not cached; results are kept for the process's TTL (24 h
// here, the seed's default).
func Example_geoprocessingCache() {
	ctx := context.Background()
	clk := newClock()
	c, done := open(&idem.Config{Now: clk.Now, ResultTTL: 24 * time.Hour})
	defer done()

	inputs := json.RawMessage(`{"process":"buffer","layer":"parcels","distance_m":50}`)
	k, _ := key.Prefixed("geo", inputs)
	runs := 0
	process := func(ctx context.Context) (any, error) {
		runs++
		clk.Add(2300 * time.Millisecond) // the buffer takes 2.3 s
		return map[string]int{"features_processed": 1200}, nil
	}

	first, _ := c.Do(ctx, k, process, nil)  // job 1: a miss, the process runs
	second, _ := c.Do(ctx, k, process, nil) // job 2, same inputs: a hit
	fmt.Println("job 1 cached:", first.WasCached, "took", first.Duration)
	fmt.Println("job 2 cached:", second.WasCached, "took", second.Duration, "result", string(second.Result))
	fmt.Println("process ran", runs, "time")

	_, err := c.Do(ctx, "geo_failing", func(context.Context) (any, error) { return nil, errors.New("bad geometry") }, nil)
	rec, lookup := c.DoRecordGet(ctx, "", "geo_failing") // Do's keys, apart from jobs' (RecordGet)
	fmt.Println("failure:", err, "- cached:", lookup == nil && rec.Status == idemtype.RecordCompleted)

	clk.Add(25 * time.Hour) // past the 24 h TTL the process runs again
	third, _ := c.Do(ctx, k, process, nil)
	fmt.Println("after 25 h cached:", third.WasCached, "- process ran", runs, "times")
	// Output:
	// job 1 cached: false took 2.3s
	// job 2 cached: true took 2.3s result {"features_processed":1200}
	// process ran 1 time
	// failure: bad geometry - cached: false
	// after 25 h cached: false - process ran 2 times
}
