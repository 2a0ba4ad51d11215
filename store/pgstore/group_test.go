package pgstore

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// Concurrent small requests of every shape share group transactions: keys
// new and existing, repeated across callers, several keys in one request,
// keyless jobs, and a malformed request. Each key gets exactly one job,
// every caller of a key sees that job, requests are whole, and only the
// malformed request fails.
func TestGroupCommitMixed(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 8, &Config{GroupCommitWorkers: 2})
	keyed := func(key string) *store.JobInsertParams {
		p := job("k")
		p.IdempotencyKey, p.Fingerprint, p.DedupWindow = key, "fp", time.Hour
		return p
	}
	if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: []*store.JobInsertParams{keyed("old")}}); err != nil {
		t.Fatal(err)
	}
	const callers, rounds = 24, 20
	var mu sync.Mutex
	seen := map[string]map[int64]bool{} // key → job ids returned
	keyless := 0
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for r := range rounds {
				var ps []*store.JobInsertParams
				switch (c + r) % 5 {
				case 0:
					ps = []*store.JobInsertParams{keyed(fmt.Sprintf("k%d", r))}
				case 1:
					ps = []*store.JobInsertParams{keyed("old")}
				case 2:
					ps = []*store.JobInsertParams{job("plain"), job("plain")}
				case 3:
					ps = []*store.JobInsertParams{keyed(fmt.Sprintf("m%d", r)), keyed(fmt.Sprintf("k%d", r)), job("plain")}
				case 4:
					bad := job("bad")
					bad.Args = json.RawMessage(`{not json`)
					ps = []*store.JobInsertParams{bad}
				}
				res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps})
				if (c+r)%5 == 4 {
					if err == nil {
						t.Errorf("malformed args accepted")
					}
					continue
				}
				if err != nil {
					t.Errorf("request %d/%d: %v", c, r, err)
					continue
				}
				mu.Lock()
				for i, x := range res {
					if x.Err != nil || x.Job == nil {
						t.Errorf("item %d: %+v", i, x)
						continue
					}
					if k := ps[i].IdempotencyKey; k != "" {
						if seen[k] == nil {
							seen[k] = map[int64]bool{}
						}
						seen[k][x.Job.ID] = true
					} else {
						keyless++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for k, ids := range seen {
		if len(ids) != 1 {
			t.Errorf("key %s: jobs %v, want one", k, ids)
		}
	}
	all, _, err := s.JobList(t.Context(), &store.JobListParams{Limit: 500, Filter: store.JobFilter{Kind: "plain"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != keyless {
		t.Errorf("%d keyless jobs stored, %d returned to callers", len(all), keyless)
	}
	keyedJobs, _, err := s.JobList(t.Context(), &store.JobListParams{Limit: 500, Filter: store.JobFilter{Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(keyedJobs) != len(seen) {
		t.Errorf("%d keyed jobs stored for %d keys", len(keyedJobs), len(seen))
	}
	if n, _, _ := s.JobList(t.Context(), &store.JobListParams{Limit: 10, Filter: store.JobFilter{Kind: "bad"}}); len(n) != 0 {
		t.Errorf("%d malformed jobs stored", len(n))
	}
	if s.groups.insertGroups.Load() >= s.groups.insertReqs.Load() {
		t.Logf("no group held more than one request (%d groups, %d requests)", s.groups.insertGroups.Load(), s.groups.insertReqs.Load())
	}
}

// Concurrent finishes of single jobs share transactions; a repeated
// finish of one job never shares a group with the first.
func TestGroupCommitFinish(t *testing.T) {
	t.Parallel()
	s := newTestStoreCfg(t, 8, &Config{GroupCommitWorkers: 2})
	batch := make([]*store.JobInsertParams, 400)
	for i := range batch {
		batch[i] = job("f")
		batch[i].RunAt = time.Now().Add(-time.Second)
	}
	if _, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: batch}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaim(t.Context(), claimParams(400))
	if err != nil || len(jobs) != 400 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			p := complete(j)
			if i%4 == 0 {
				// The same completion twice at once, then another result.
				again := complete(j)
				var errs [2]error
				var w2 sync.WaitGroup
				for k, q := range []*store.JobFinishParams{p, again} {
					w2.Go(func() {
						e, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{q})
						if err != nil {
							t.Errorf("finish: %v", err)
							return
						}
						errs[k] = e[0]
					})
				}
				w2.Wait()
				if errs[0] != nil || errs[1] != nil {
					t.Errorf("job %d: identical finishes: %v, %v", j.ID, errs[0], errs[1])
				}
				other := complete(j)
				other.Result = json.RawMessage(`{"other":1}`)
				e, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{other})
				if err != nil || e[0] == nil {
					t.Errorf("job %d: finish with another result: %v %v", j.ID, err, e)
				}
				return
			}
			e, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{p})
			if err != nil || e[0] != nil {
				t.Errorf("finish job %d: %v %v", j.ID, err, e)
			}
		})
	}
	wg.Wait()
	for _, j := range jobs {
		got, err := s.JobGet(t.Context(), &store.JobGetParams{Tenant: "", ID: j.ID})
		if err != nil || got.State != idemtype.StateCompleted {
			t.Fatalf("job %d: %v %v", j.ID, got, err)
		}
		as, err := s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "", JobID: j.ID})
		if err != nil || len(as) != 1 || as[0].Outcome != idemtype.OutcomeCompleted {
			t.Fatalf("job %d attempts: %v", j.ID, err)
		}
	}
	t.Logf("%d finish requests in %d transactions", s.groups.finishReqs.Load(), s.groups.finishGroups.Load())
}
