package idemhttp_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/idem-dev/idem"
)

// apiTime matches an RFC 3339 time in a reply; its group 1 is the fraction.
var apiTime = regexp.MustCompile(`"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(?:Z|[+-]\d\d:\d\d)"`)

// checkMicroseconds fails unless every time in body has at most six
// fractional digits (the stores' precision, and every other reply's).
func checkMicroseconds(t *testing.T, what string, r *resp) {
	t.Helper()
	if r.status >= 300 {
		t.Fatalf("%s: status %d: %s", what, r.status, r.body)
	}
	ms := apiTime.FindAllSubmatch(r.body, -1)
	if len(ms) == 0 {
		t.Fatalf("%s: no time in %s", what, r.body)
	}
	for _, m := range ms {
		if len(m[1]) > 1+6 {
			t.Errorf("%s: %s has more than microseconds", what, m[0])
		}
	}
}

// TestLeaseTimesInMicroseconds (both stores): the times of the lease
// routes — a result lease's acquire and renew, a claim, a job heartbeat —
// have microseconds as every other time of the API. The result-lease
// renew (and the heartbeat) gave lease_expires_at in nanoseconds, computed
// from the clock, not read back from the store.
func TestLeaseTimesInMicroseconds(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]opener{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// A clock with nanoseconds that no truncation by chance hides.
			now := func() time.Time { return time.Now().Truncate(time.Microsecond).Add(123 * time.Nanosecond) }
			e := setup(t, open, &setupOpts{clientCfg: &idem.Config{DisableMaintenance: true, Now: now}})
			r := e.req("POST", "/v1/idempotency/k/lease", e.keyA, map[string]any{"lease": "30s"})
			checkMicroseconds(t, "lease acquire", r)
			token := r.json(t)["lease_token"]
			checkMicroseconds(t, "lease renew", e.req("POST", "/v1/idempotency/k/lease/renew", e.keyA, map[string]any{"lease_token": token, "lease": "40s"}))
			checkMicroseconds(t, "lease complete", e.req("POST", "/v1/idempotency/k/lease/complete", e.keyA, map[string]any{"lease_token": token, "result": 1}))
			checkMicroseconds(t, "lease acquire, cached", e.req("POST", "/v1/idempotency/k/lease", e.keyA, nil))
			e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "q"})
			j := e.claim(e.keyA, "q")
			if s, _ := j["lease_expires_at"].(string); !apiTime.MatchString(`"`+s+`"`) || len(apiTime.FindStringSubmatch(`"` + s + `"`)[1]) > 7 {
				t.Errorf("claim: lease_expires_at %q, want microseconds", s)
			}
			path := "/v1/jobs/" + j["id"].(string)
			checkMicroseconds(t, "heartbeat", e.req("POST", path+"/heartbeat", e.keyA, map[string]any{"lease_token": j["lease_token"], "lease": "40s"}))
			checkMicroseconds(t, "complete", e.req("POST", path+"/complete", e.keyA, map[string]any{"lease_token": j["lease_token"]}))
		})
	}
}
