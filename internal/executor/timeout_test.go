package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/executor"
)

// TestTimeoutZeroMeansNoLimit: a Timeout of 0 for a job means no limit —
// its handler's context has no deadline and is live — while a positive one
// gives the handler a deadline that far away. (Kills `d <= 0` → `< 0` and
// its negation in callWithTimeout: the first ended every unlimited job's
// context at once, the second dropped every real timeout.)
func TestTimeoutZeroMeansNoLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	limits := map[string]time.Duration{"free": 0, "bounded": time.Hour}
	exec, err := executor.New(&executor.Config{
		Store: b.store, Now: func() time.Time { return now }, LeaseDuration: time.Minute,
		ResultTTL:  func(string) time.Duration { return time.Hour },
		RetryDelay: func(*idemtype.JobRow) time.Duration { return time.Second },
		Timeout:    func(row *idemtype.JobRow) time.Duration { return limits[row.Kind] },
		Handler: func(string) executor.Handler {
			return func(ctx context.Context, _ *idemtype.JobRow) (json.RawMessage, error) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				left := "none"
				if d, ok := ctx.Deadline(); ok {
					left = time.Until(d).Round(time.Hour).String()
				}
				return json.Marshal(left)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]string{"free": `"none"`, "bounded": `"1h0m0s"`} {
		fin := exec.Execute(context.Background(), b.claim(t, kind, ""), nil)
		if fin.State != idemtype.StateCompleted || string(fin.Result) != want {
			t.Errorf("%s: %s %q (%s), want completed with deadline %s", kind, fin.State, fin.Result, fin.Error, want)
		}
	}
}
