package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func insertCases() []testCase {
	return []testCase{
		{"JobInsertMany/fields_as_given", testInsertFields},
		{"JobInsertMany/initial_states", testInsertInitialStates},
		{"JobInsertMany/unknown_dependency_fails_only_its_item", testInsertUnknownDependency},
		{"JobInsertMany/ids_increase_in_batch_order", testInsertIDOrder},
		{"JobInsertMany/large_keyless_batch_as_stored", testInsertLargeBatch},
		{"JobInsertMany/times_utc_microseconds", testInsertTimes},
		{"JobGet/tenant_scoping", testJobGetTenant},
		{"JobInsertMany/dependencies_release_and_cascade", testDependencies},
	}
}

func testInsertFields(t *testing.T, s store.Store) {
	now := at(0)
	p := &store.JobInsertParams{
		Tenant: "t1", Queue: "q1", Kind: "k1", Args: json.RawMessage(`{"a":1,"b":[1,2],"c":"x"}`),
		Priority: 5, MaxAttempts: 7, RunAt: at(-time.Minute), PartitionKey: "part-1",
		Metadata:       json.RawMessage(`{"m":"x"}`),
		RetryPolicy:    json.RawMessage(`{"base":"1s","delays":["1s","5s"]}`),
		IdempotencyKey: "key-1", Fingerprint: hash("1"), DedupWindow: time.Hour, ResultTTL: 2 * time.Hour,
	}
	plain := &store.JobInsertParams{Tenant: "t2", Queue: "q2", Kind: "k2", Args: json.RawMessage(`{}`),
		Priority: -3, MaxAttempts: 1, RunAt: now}
	got := insertNew(t, s, now, p, plain)
	for i, j := range got {
		want := []*store.JobInsertParams{p, plain}[i]
		for _, row := range []*idemtype.JobRow{j, mustGet(t, s, j.ID)} {
			checkInserted(t, row, want, now)
		}
	}
	if got[0].ID <= 0 {
		t.Errorf("ID = %d, want > 0", got[0].ID)
	}
	if len(got[1].Metadata) != 0 {
		t.Errorf("Metadata = %s, want nil when none given", got[1].Metadata)
	}
	if len(got[1].DependsOn) != 0 {
		t.Errorf("DependsOn = %v, want none", got[1].DependsOn)
	}
}

// checkInserted checks every field of a freshly inserted, available job.
func checkInserted(t *testing.T, j *idemtype.JobRow, p *store.JobInsertParams, now time.Time) {
	t.Helper()
	if j.Tenant != p.Tenant || j.Queue != p.Queue || j.Kind != p.Kind {
		t.Errorf("job %d: tenant/queue/kind %q/%q/%q, want %q/%q/%q", j.ID, j.Tenant, j.Queue, j.Kind, p.Tenant, p.Queue, p.Kind)
	}
	wantJSON(t, "Args", j.Args, string(p.Args))
	if p.Metadata != nil {
		wantJSON(t, "Metadata", j.Metadata, string(p.Metadata))
	}
	if p.RetryPolicy != nil {
		wantJSON(t, "RetryPolicy", j.RetryPolicy, string(p.RetryPolicy))
	} else if len(j.RetryPolicy) != 0 {
		t.Errorf("job %d: RetryPolicy %s, want none", j.ID, j.RetryPolicy)
	}
	if j.State != idemtype.StateAvailable {
		t.Errorf("job %d: State %s, want available", j.ID, j.State)
	}
	if j.Priority != p.Priority || j.MaxAttempts != p.MaxAttempts || j.Attempt != 0 {
		t.Errorf("job %d: priority/max_attempts/attempt %d/%d/%d, want %d/%d/0", j.ID, j.Priority, j.MaxAttempts, j.Attempt, p.Priority, p.MaxAttempts)
	}
	wantTime(t, "RunAt", j.RunAt, p.RunAt)
	wantTime(t, "CreatedAt", j.CreatedAt, now)
	wantNil(t, "StartedAt", j.StartedAt)
	wantNil(t, "FinishedAt", j.FinishedAt)
	if j.PartitionKey != p.PartitionKey || j.IdempotencyKey != p.IdempotencyKey {
		t.Errorf("job %d: partition/key %q/%q, want %q/%q", j.ID, j.PartitionKey, j.IdempotencyKey, p.PartitionKey, p.IdempotencyKey)
	}
	if j.Result != nil || j.WasCached || j.OriginalJobID != 0 || j.LastError != "" || j.WorkerID != "" {
		t.Errorf("job %d: result/was_cached/original/last_error/worker %s/%v/%d/%q/%q, want none",
			j.ID, j.Result, j.WasCached, j.OriginalJobID, j.LastError, j.WorkerID)
	}
	wantNoLease(t, j)
}

func testInsertInitialStates(t *testing.T, s store.Store) {
	now := at(0)
	dead := killJob(t, s, insert1(t, s, now, newJob("dead")), now)
	cancelled := cancelJob(t, s, insert1(t, s, now, newJob("cancelled")), now)
	done := completeJob(t, s, insert1(t, s, now, newJob("done")), now, `1`)
	open := insert1(t, s, now, newJob("open"))

	now = at(time.Minute)
	mk := func(kind string, runAt time.Time, deps ...int64) *store.JobInsertParams {
		p := newJob(kind)
		p.RunAt = runAt
		p.DependsOn = deps
		return p
	}
	cases := []struct {
		p    *store.JobInsertParams
		want idemtype.JobState
	}{
		{mk("due_now", now), idemtype.StateAvailable},
		{mk("due_past", at(-time.Hour)), idemtype.StateAvailable},
		{mk("future", now.Add(time.Second)), idemtype.StateScheduled},
		{mk("dep_open", now, open.ID), idemtype.StatePending},
		{mk("dep_open_future", now.Add(time.Hour), open.ID), idemtype.StatePending},
		{mk("dep_done", now, done.ID), idemtype.StateAvailable},
		{mk("dep_done_future", now.Add(time.Hour), done.ID), idemtype.StateScheduled},
		{mk("dep_open_and_done", now, done.ID, open.ID), idemtype.StatePending},
		{mk("dep_dead", now, dead.ID), idemtype.StateCancelled},
		{mk("dep_cancelled", now, cancelled.ID), idemtype.StateCancelled},
		{mk("dep_open_and_dead", now, open.ID, dead.ID), idemtype.StateCancelled},
	}
	ps := make([]*store.JobInsertParams, len(cases))
	for i, c := range cases {
		ps[i] = c.p
	}
	got := insertNew(t, s, now, ps...)
	for i, c := range cases {
		for _, j := range []*idemtype.JobRow{got[i], mustGet(t, s, got[i].ID)} {
			if j.State != c.want {
				t.Errorf("%s: state %s, want %s", c.p.Kind, j.State, c.want)
			}
			if !slices.Equal(sorted(j.DependsOn), sorted(c.p.DependsOn)) {
				t.Errorf("%s: DependsOn %v, want %v", c.p.Kind, j.DependsOn, c.p.DependsOn)
			}
			wantTime(t, c.p.Kind+" RunAt", j.RunAt, c.p.RunAt)
			if c.want == idemtype.StateCancelled {
				wantTimeP(t, c.p.Kind+" FinishedAt", j.FinishedAt, now)
				if j.LastError == "" {
					t.Errorf("%s: cancelled with an empty LastError", c.p.Kind)
				}
			} else {
				wantNil(t, c.p.Kind+" FinishedAt", j.FinishedAt)
			}
		}
	}
}

func testInsertUnknownDependency(t *testing.T, s store.Store) {
	now := at(0)
	other := newJob("other_tenant")
	other.Tenant = "tenant-b"
	otherJob := insert1(t, s, now, other)

	bad := newJob("bad")
	bad.DependsOn = []int64{otherJob.ID + 100000}
	badTenant := newJob("bad_tenant")
	badTenant.DependsOn = []int64{otherJob.ID}
	res := insertAll(t, s, now, newJob("ok1"), bad, newJob("ok2"), badTenant, newJob("ok3"))
	for _, i := range []int{1, 3} {
		// Bad input naming depends_on (the HTTP API's 400), that still
		// says what was not found.
		var inv *idemtype.InvalidError
		if !errors.As(res[i].Err, &inv) || inv.Field != "depends_on" || !errors.Is(res[i].Err, idemtype.ErrNotFound) {
			t.Errorf("item %d: error %v, want an InvalidError for depends_on wrapping ErrNotFound", i, res[i].Err)
		}
		if res[i].Job != nil || res[i].Existing {
			t.Errorf("item %d: Job %v Existing %v, want nil, false", i, res[i].Job, res[i].Existing)
		}
	}
	var good []int64
	for _, i := range []int{0, 2, 4} {
		if res[i].Err != nil || res[i].Job == nil {
			t.Fatalf("item %d: %v", i, res[i].Err)
		}
		wantState(t, s, res[i].Job.ID, idemtype.StateAvailable)
		good = append(good, res[i].Job.ID)
	}
	if !slices.IsSorted(good) || good[0] == good[1] || good[1] == good[2] {
		t.Errorf("ids of the good items %v are not increasing", good)
	}
	if n := len(listAll(t, s, store.JobFilter{Tenant: "default"})); n != 3 {
		t.Errorf("tenant default holds %d jobs, want 3", n)
	}
}

func testInsertIDOrder(t *testing.T, s store.Store) {
	var ps []*store.JobInsertParams
	for i := range 10 {
		ps = append(ps, newJob(fmt.Sprintf("k%d", i)))
	}
	first := insertNew(t, s, at(0), ps...)
	second := insertNew(t, s, at(0), ps[:3]...)
	all := append(first, second...)
	for i, j := range all {
		if want := ps[i%10].Kind; j.Kind != want {
			t.Errorf("result %d: kind %s, want %s (results out of order)", i, j.Kind, want)
		}
		if i > 0 && j.ID <= all[i-1].ID {
			t.Errorf("result %d: id %d not above %d", i, j.ID, all[i-1].ID)
		}
	}
}

// testInsertLargeBatch: a keyless batch large enough for a backend's bulk
// path (PostgreSQL: COPY, which does not read the rows back) answers each
// item with the row as stored, in item order, with increasing ids; future
// jobs are scheduled, the rest available and claimable.
func testInsertLargeBatch(t *testing.T, s store.Store) {
	zone := time.FixedZone("Y", -7*3600)
	now := time.Date(2031, 3, 4, 10, 36, 7, 123456000, zone)
	var ps []*store.JobInsertParams
	for i := range 300 {
		p := &store.JobInsertParams{Tenant: fmt.Sprintf("t%d", i%3), Queue: "bulk", Kind: fmt.Sprintf("k%d", i%7),
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"s":"x\u00e9"}`, i)), Priority: i % 5, MaxAttempts: 1 + i%4,
			RunAt: now.Add(time.Duration(i%3-1) * time.Minute), Timeout: time.Duration(i%2) * 1500 * time.Microsecond}
		if i%2 == 0 {
			p.Metadata = json.RawMessage(`{"m":[1,2]}`)
			p.RetryPolicy = json.RawMessage(`{"base":"1s"}`)
		}
		ps = append(ps, p)
	}
	got := insertNew(t, s, now, ps...)
	if len(got) != len(ps) {
		t.Fatalf("%d results for %d jobs", len(got), len(ps))
	}
	for i, j := range got {
		p := ps[i]
		if i > 0 && j.ID <= got[i-1].ID {
			t.Errorf("result %d: id %d not above %d", i, j.ID, got[i-1].ID)
		}
		want := idemtype.StateAvailable
		if p.RunAt.After(now) {
			want = idemtype.StateScheduled
		}
		stored := mustGet(t, s, j.ID)
		for _, row := range []*idemtype.JobRow{j, stored} {
			if row.State != want || row.Tenant != p.Tenant || row.Kind != p.Kind || row.Priority != p.Priority ||
				row.MaxAttempts != p.MaxAttempts || row.Timeout != p.Timeout {
				t.Fatalf("job %d (item %d): %+v, want state %s and the item's fields %+v", row.ID, i, row, want, p)
			}
			wantJSON(t, "Args", row.Args, string(p.Args))
			if p.Metadata != nil {
				wantJSON(t, "Metadata", row.Metadata, string(p.Metadata))
				wantJSON(t, "RetryPolicy", row.RetryPolicy, string(p.RetryPolicy))
			} else if len(row.Metadata) != 0 || len(row.RetryPolicy) != 0 {
				t.Errorf("job %d: metadata/retry %s/%s, want none", row.ID, row.Metadata, row.RetryPolicy)
			}
			wantTime(t, "RunAt", row.RunAt, p.RunAt)
			wantTime(t, "CreatedAt", row.CreatedAt, now)
			wantNil(t, "FinishedAt", row.FinishedAt)
		}
	}
}

func testInsertTimes(t *testing.T, s store.Store) {
	zone := time.FixedZone("X", 5*3600+30*60)
	now := time.Date(2031, 3, 4, 10, 36, 7, 654321000, zone)
	p := newJob("times")
	p.RunAt = now.Add(-1500 * time.Microsecond)
	j := insert1(t, s, now, p)
	for _, row := range []*idemtype.JobRow{j, mustGet(t, s, j.ID)} {
		wantTime(t, "RunAt", row.RunAt, p.RunAt)
		wantTime(t, "CreatedAt", row.CreatedAt, now)
	}
	c := claimJob(t, s, j, now)
	wantTimeP(t, "StartedAt", c.StartedAt, now)
	wantTimeP(t, "LeaseExpiresAt", c.LeaseExpiresAt, now.Add(lease))
}

func testJobGetTenant(t *testing.T, s store.Store) {
	p := newJob("k")
	p.Tenant = "t1"
	j := insert1(t, s, at(0), p)
	got, err := s.JobGet(t.Context(), &store.JobGetParams{Tenant: "t1", ID: j.ID})
	if err != nil || got.ID != j.ID {
		t.Errorf("JobGet(t1): %v %v", got, err)
	}
	_, err = s.JobGet(t.Context(), &store.JobGetParams{Tenant: "t2", ID: j.ID})
	wantErr(t, "JobGet(other tenant)", err, idemtype.ErrNotFound)
	_, err = s.JobGet(t.Context(), &store.JobGetParams{Tenant: "", ID: j.ID + 1000})
	wantErr(t, "JobGet(unknown id)", err, idemtype.ErrNotFound)
}

func testDependencies(t *testing.T, s store.Store) {
	root := insertAll(t, s, base, newJob("root"))[0].Job
	child := newJob("child")
	child.DependsOn = []int64{root.ID}
	c := insertAll(t, s, base, child)[0].Job
	if c.State != idemtype.StatePending {
		t.Fatalf("child state %s", c.State)
	}
	grand := newJob("grand")
	grand.DependsOn = []int64{c.ID}
	g := insertAll(t, s, base, grand)[0].Job
	missing := newJob("x")
	missing.DependsOn = []int64{99999}
	if r := insertAll(t, s, base, missing)[0]; r.Err == nil {
		t.Fatal("missing dependency accepted")
	}

	got := claim(t, s, base, 10)
	if len(got) != 1 || got[0].ID != root.ID {
		t.Fatalf("claimed %v", ids(got))
	}
	finishAs(t, s, got[0], idemtype.StateCompleted, base)
	if st := mustGet(t, s, c.ID).State; st != idemtype.StateAvailable {
		t.Fatalf("child after completion: %s", st)
	}
	if st := mustGet(t, s, g.ID).State; st != idemtype.StatePending {
		t.Fatalf("grandchild: %s", st)
	}

	// Cascade: a dead job cancels its pending dependants transitively.
	r2 := insertAll(t, s, base, newJob("r2"))[0].Job
	d1 := newJob("d1")
	d1.DependsOn = []int64{r2.ID}
	j1 := insertAll(t, s, base, d1)[0].Job
	d2 := newJob("d2")
	d2.DependsOn = []int64{j1.ID}
	j2 := insertAll(t, s, base, d2)[0].Job
	if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: r2.ID, Reason: "stop", Now: base}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{j1.ID, j2.ID} {
		j := mustGet(t, s, id)
		if j.State != idemtype.StateCancelled || j.LastError == "" || j.FinishedAt == nil {
			t.Fatalf("dependant %d: %s %q", id, j.State, j.LastError)
		}
	}
	// A new job depending on a cancelled one starts cancelled.
	d3 := newJob("d3")
	d3.DependsOn = []int64{r2.ID}
	if j := insertAll(t, s, base, d3)[0].Job; j.State != idemtype.StateCancelled {
		t.Fatalf("d3: %s", j.State)
	}
}
