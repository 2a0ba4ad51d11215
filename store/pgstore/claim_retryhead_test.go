package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
	"github.com/jackc/pgx/v5"
)

// TestRetriedHeadAgainstStaleClaim: a claim whose snapshot predates the
// retry of its partition's cancelled head, but that reaches the successor's
// row only after the retry committed, must not take the successor: its
// snapshot still reads the head as finished, so the head rule alone lets
// it through. Taken, the successor runs beside the retried head (another
// claim, after the retry, took it before the stale claim committed) or
// before it (the retried head then waits for it).
//
// The stale claim is the claim statement (tenantClaimProbe and claimCTEs,
// as qClaimFair) behind a one-time filter that waits, after the
// statement's snapshot and before its scan, for an advisory lock the test
// holds; the retry (and the other claim) commit while it waits.
func TestRetriedHeadAgainstStaleClaim(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		lockKey    int
		freshFirst bool // the other claim takes the retried head before the stale claim goes on
	}{
		{"fresh_claim_first", 454545, true},
		{"stale_claim_first", 454546, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testRetriedHeadAgainstStaleClaim(t, c.lockKey, c.freshFirst)
		})
	}
}

func testRetriedHeadAgainstStaleClaim(t *testing.T, lockKey int, freshFirst bool) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	lease := now.Add(time.Minute)
	var ps []*store.JobInsertParams
	for range 2 {
		p := benchJob()
		p.RunAt, p.PartitionKey = now, "P"
		ps = append(ps, p)
	}
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("insert: %v %+v", err, res)
	}
	head, succ := res[0].Job.ID, res[1].Job.ID
	if _, err := s.JobCancel(ctx, &store.JobCancelParams{ID: head, Reason: "test", Now: now}); err != nil {
		t.Fatalf("cancel the head: %v", err)
	}
	claimNow := func(want int64, when string) *idemtype.JobRow {
		t.Helper()
		got, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "fresh", Limit: 10,
			LeaseUntil: lease, Now: now})
		if err != nil {
			t.Fatalf("claim %s: %v", when, err)
		}
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("claim %s took %v, want job %d", when, rowIDs(got), want)
		}
		return got[0]
	}

	gate, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Release()
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	q := s.sql(`WITH cand AS (
    SELECT c.id FROM unnest($2::text[], $3::int[]) AS x(tenant, n)
    CROSS JOIN LATERAL ` + tenantClaimProbe("$4", "$5") + ` AS c
    WHERE (SELECT 1 FROM pg_advisory_xact_lock_shared($9::bigint)) = 1
), ` + claimCTEs("$4", "$6", "$7", "$8") + `
SELECT id FROM upd`)
	type result struct {
		ids []int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		rows, err := s.pool.Query(ctx, q, "default", []string{"default"}, []int{10}, now, nil, lease, "stale", "", lockKey)
		if err != nil {
			done <- result{err: err}
			return
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		done <- result{ids, err}
	}()
	waitAdvisoryWaiter(t, s, lockKey) // the stale claim's snapshot is taken

	if _, err := s.JobRetryMany(ctx, &store.JobRetryManyParams{IDs: []int64{head}, Now: now}); err != nil {
		t.Fatalf("retry the head: %v", err)
	}
	var running *idemtype.JobRow
	if freshFirst {
		running = claimNow(head, "after the retry")
	}
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.ids) != 0 {
		t.Fatalf("the stale claim took %v (the successor is %d) although the retried head %d goes first", r.ids, succ, head)
	}
	if !freshFirst {
		running = claimNow(head, "after the stale claim")
	}

	// The successor is the partition's next job once the head completes.
	fin := &store.JobFinishParams{ID: head, LeaseToken: running.LeaseToken, State: idemtype.StateCompleted,
		Outcome: idemtype.OutcomeCompleted, FinishedAt: now}
	if _, err := s.JobFinishMany(ctx, []*store.JobFinishParams{fin}); err != nil {
		t.Fatalf("finish the head: %v", err)
	}
	claimNow(succ, "after the head completed")
}

// TestClaimVersionCheckPlan: the version check of the head rule
// (tenantClaimProbe) is a TID lookup of the candidate's row, never a scan
// of jobs (an EXISTS form was planned as a hashed subplan over a
// sequential scan of the whole table). A plan assert, not a timing assert.
func TestClaimVersionCheckPlan(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	ps := make([]*store.JobInsertParams, 5000)
	for i := range ps {
		ps[i] = benchJob()
		ps[i].RunAt = now
		if i%2 == 0 {
			ps[i].PartitionKey = "p" + itoa(i%7)
		}
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql("ANALYZE {schema}.jobs")); err != nil {
		t.Fatal(err)
	}
	plan, err := s.explain(ctx, qClaimFair, "default", []string{"default"}, []int{10}, now, nil, now.Add(time.Minute), "w", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "Tid Scan on jobs") || strings.Contains(plan, "Seq Scan on jobs") {
		t.Fatalf("claim plan: want the version check as a Tid Scan and no Seq Scan on jobs:\n%s", plan)
	}
}

func rowIDs(js []*idemtype.JobRow) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
