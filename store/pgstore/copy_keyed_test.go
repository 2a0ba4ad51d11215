package pgstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// keyedBatch returns n keyed jobs with keys prefix-000…, fingerprint fp.
func keyedBatch(prefix string, n int, fp string) []*store.JobInsertParams {
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = benchJob()
		ps[i].IdempotencyKey = fmt.Sprintf("%s-%03d", prefix, i)
		ps[i].Fingerprint, ps[i].DedupWindow = fp, time.Hour
	}
	return ps
}

// TestKeyedCopyPaths: a large batch of new keys is copied, and so is one
// that repeats a key (answered from its leader); one whose last
// key (in lock order) exists rolls back to the savepoint and takes the
// general path, answering the existing key with its job and creating the
// others; racing batches of the same new keys create each job once, some
// of them copying and the ones that met a committed key retrying. (The
// answers in every case are the conformance suite's: storetest's large
// keyed batches.)
func TestKeyedCopyPaths(t *testing.T) {
	s := newTestStore(t, 16)
	ctx := t.Context()
	insert := func(ps []*store.JobInsertParams) []store.JobInsertResult {
		t.Helper()
		res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Job == nil {
				t.Fatalf("item %d: %+v", i, r)
			}
		}
		return res
	}

	insert(keyedBatch("a", 80, "fp"))
	if c, r := s.keyedCopied.Load(), s.keyedCopyRetried.Load(); c != 1 || r != 0 {
		t.Fatalf("batch of new keys: %d copied, %d retried; want 1, 0", c, r)
	}

	// New keys, one of them repeated (same request: its leader's job;
	// another fingerprint: KeyReusedError), all answered from the copy.
	rp := keyedBatch("r", 70, "fp")
	same, other := keyedBatch("r", 4, "fp")[3], keyedBatch("r", 5, "other")[4]
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: append(rp, same, other)})
	if err != nil {
		t.Fatal(err)
	}
	if c, r := s.keyedCopied.Load(), s.keyedCopyRetried.Load(); c != 2 || r != 0 {
		t.Fatalf("batch of new keys with repeats: %d copied, %d retried; want 2, 0", c, r)
	}
	if r := res[70]; r.Err != nil || !r.Existing || r.Job == nil || r.Job.ID != res[3].Job.ID {
		t.Errorf("repeated key, same request: %+v, want existing job %d", r, res[3].Job.ID)
	}
	var reused *idemtype.KeyReusedError
	if r := res[71]; !errors.As(r.Err, &reused) || reused.JobID != res[4].Job.ID {
		t.Errorf("repeated key, other request: %+v, want KeyReusedError for job %d", r, res[4].Job.ID)
	}

	last := insert(keyedBatch("b", 1, "fp"))[0].Job.ID // b-000 sorts after every a-…
	ps := append(keyedBatch("a2", 79, "fp"), keyedBatch("b", 1, "fp")...)
	res = insert(ps)
	if c, r := s.keyedCopied.Load(), s.keyedCopyRetried.Load(); c != 2 || r != 1 {
		t.Fatalf("batch with an existing key: %d copied, %d retried; want 2, 1", c, r)
	}
	for i, r := range res[:79] {
		if r.Existing {
			t.Errorf("new key %d answered as existing", i)
		}
	}
	if r := res[79]; !r.Existing || r.Job.ID != last {
		t.Errorf("existing key: %+v, want existing job %d", r, last)
	}

	const racers = 6
	var mu sync.Mutex
	jobOf := map[string]map[int64]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: keyedBatch("race", 100, "fp")})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			for i, r := range res {
				if r.Err != nil || r.Job == nil {
					t.Errorf("item %d: %+v", i, r)
					continue
				}
				k := r.Job.IdempotencyKey
				if jobOf[k] == nil {
					jobOf[k] = map[int64]bool{}
				}
				jobOf[k][r.Job.ID] = true
			}
		})
	}
	close(start)
	wg.Wait()
	if len(jobOf) != 100 {
		t.Errorf("%d keys answered, want 100", len(jobOf))
	}
	for k, ids := range jobOf {
		if len(ids) != 1 {
			t.Errorf("key %s answered with %d jobs", k, len(ids))
		}
	}
	var n int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM {schema}.jobs WHERE idempotency_key LIKE 'race-%'`)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Errorf("%d jobs of the racing keys stored, want 100", n)
	}
	c, r := s.keyedCopied.Load()-2, s.keyedCopyRetried.Load()-1
	if c < 1 || r < 1 || c+r != racers {
		t.Errorf("racing batches: %d copied, %d retried; want at least one of each, %d in all", c, r, racers)
	}
}

// TestCopyEncodingRoundTrip: rows encoded by copyBuf read back as builtJob
// and the records as qInsertFast writes them, for the values the binary
// format treats apart: dependencies (a non-empty bigint[]; no insert path
// copies them today), times before 2000 and 1970 and with nanoseconds,
// NULL and present json, empty args, non-ASCII text, no dedup window.
func TestCopyEncodingRoundTrip(t *testing.T) {
	s := newTestStore(t, 2)
	ctx := t.Context()
	now := time.Date(2031, 3, 4, 10, 36, 7, 123456789, time.FixedZone("Y", -7*3600))
	mk := func(p *store.JobInsertParams) *insertItem {
		return &insertItem{p: p, now: now, state: "available", create: true}
	}
	a := benchJob()
	a.Tenant, a.Kind, a.Args = "tenant-é", "k\u00e9\u4e16", json.RawMessage(`{"s":"tab\there \\ \"q\""}`)
	a.RunAt = time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	a.DependsOn = []int64{7, 1 << 40}
	a.Metadata, a.RetryPolicy = json.RawMessage(`{"m":[1,2]}`), json.RawMessage(`{"base":"1s"}`)
	a.IdempotencyKey, a.Fingerprint, a.DedupWindow = "key-é", "fp", 90*time.Minute
	a.ResultTTL, a.Timeout, a.Priority, a.MaxAttempts = 36*time.Hour, 1500*time.Microsecond, -3, 9
	b := benchJob()
	b.Args = nil
	b.RunAt = time.Date(1969, 7, 20, 20, 17, 40, 500, time.UTC)
	b.IdempotencyKey, b.Fingerprint, b.PartitionKey = "no-window", "fp2", "p"
	items := []*insertItem{mk(a), mk(b)}
	items[1].state, items[1].lastErr = "scheduled", "why"
	rows, err := s.pool.Query(ctx, s.sql(qAllocIDs), len(items))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		it.id = ids[i]
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if err := s.copyRecords(ctx, conn, items, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.copyJobs(ctx, conn, items); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		got, err := s.JobGet(ctx, &store.JobGetParams{ID: it.id})
		if err != nil {
			t.Fatal(err)
		}
		want := builtJob(it)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("job %d read back\n %+v\nwant builtJob\n %+v", it.id, got, want)
		}
		var dedupUs, ttlUs, timeoutUs int64
		err = s.pool.QueryRow(ctx, s.sql(`SELECT dedup_window_us, result_ttl_us, timeout_us FROM {schema}.jobs WHERE id = $1`),
			it.id).Scan(&dedupUs, &ttlUs, &timeoutUs)
		if err != nil {
			t.Fatal(err)
		}
		if dedupUs != it.p.DedupWindow.Microseconds() || ttlUs != it.p.ResultTTL.Microseconds() || timeoutUs != it.p.Timeout.Microseconds() {
			t.Errorf("job %d: dedup %d ttl %d timeout %d µs", it.id, dedupUs, ttlUs, timeoutUs)
		}
		var status, fp string
		var jobID int64
		var created time.Time
		var until, expires *time.Time
		err = s.pool.QueryRow(ctx, s.sql(`SELECT status, fingerprint, job_id, created_at, dedup_until, expires_at
FROM {schema}.records WHERE tenant = $1 AND key = $2`), it.p.Tenant, it.p.IdempotencyKey).Scan(&status, &fp, &jobID, &created, &until, &expires)
		if err != nil {
			t.Fatal(err)
		}
		if status != "in_progress" || fp != it.p.Fingerprint || jobID != it.id || !created.Equal(now.Truncate(time.Microsecond)) {
			t.Errorf("record of %q: %s %q job %d created %v", it.p.IdempotencyKey, status, fp, jobID, created)
		}
		if it.p.DedupWindow == 0 {
			if until != nil || expires != nil {
				t.Errorf("record of %q: dedup_until %v expires_at %v, want NULL", it.p.IdempotencyKey, until, expires)
			}
		} else if d := now.Add(it.p.DedupWindow).Truncate(time.Microsecond); until == nil || expires == nil || !until.Equal(d) || !expires.Equal(d) {
			t.Errorf("record of %q: dedup_until %v expires_at %v, want %v", it.p.IdempotencyKey, until, expires, d)
		}
	}
}
