package storetest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// seedCases are the behaviours the five seed systems rely on: the record of
// a dead or cancelled job reads failed, stats count records by status.
func seedCases() []testCase {
	return []testCase{
		{"Records/dead_or_cancelled_job_reads_failed", testRecordFailedStatus},
		{"RecordStats/counts_by_status", testRecordStatsByStatus},
		{"JobFinishMany/error_code_of_latest_failure", testErrorCode},
		{"JobResolve/marks_dead_job_resolved_once", testResolve},
		{"JobResolve/not_dead_unknown_other_tenant", testResolveRejects},
		{"JobResolve/race_8_resolvers_one_resolution", testResolveRace},
		{"JobList/by_error_code_and_resolution", testListByCode},
		{"JobRetryMany/by_error_code_clears_resolution", testRequeueByCode},
		{"QueueStats/dead_unresolved", testStatsUnresolved},
		{"BatchCreate/creates_batch_and_jobs_once", testBatchCreate},
		{"BatchCreate/failed_item_creates_nothing", testBatchCreateItemError},
		{"BatchCreate/race_one_batch_16_creators", testBatchRace},
		{"BatchGet/unknown_and_other_tenant", testBatchGetNotFound},
	}
}

func testRecordFailedStatus(t *testing.T, s store.Store) {
	dead := killJob(t, s, insert1(t, s, at(0), keyed("k", "dead", "fp1")), at(0))
	cancelled := cancelJob(t, s, insert1(t, s, at(0), keyed("k", "cancelled", "fp2")), at(0))
	if got := record(t, s, "default", "dead", at(2*time.Second)); got.Status != idemtype.RecordFailed || got.JobID != dead.ID {
		t.Errorf("record of a dead job: status %q job %d, want failed job %d", got.Status, got.JobID, dead.ID)
	}
	if got := record(t, s, "", "cancelled", at(2*time.Second)); got.Status != idemtype.RecordFailed || got.JobID != cancelled.ID {
		t.Errorf("record of a cancelled job: status %q job %d, want failed", got.Status, got.JobID)
	}
	// Requeued, the job is live again and so is its record.
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{IDs: []int64{dead.ID},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(3 * time.Second)})
	wantOK(t, "JobRetryMany", err)
	if len(moved) != 1 {
		t.Fatalf("JobRetryMany moved %d jobs, want 1", len(moved))
	}
	if got := record(t, s, "default", "dead", at(4*time.Second)); got.Status != idemtype.RecordInProgress {
		t.Errorf("record of a requeued job: status %q, want in_progress", got.Status)
	}
}

func testRecordStatsByStatus(t *testing.T, s store.Store) {
	completeJob(t, s, insert1(t, s, at(0), keyed("k", "done", "fp1")), at(0), `{"ok":true}`)
	killJob(t, s, insert1(t, s, at(0), keyed("k", "dead", "fp2")), at(0))
	insert1(t, s, at(0), keyed("k", "waiting", "fp3"))
	st, err := s.RecordStats(t.Context(), &store.RecordStatsParams{Now: at(5 * time.Second)})
	wantOK(t, "RecordStats", err)
	if st.Entries != 3 || st.Completed != 1 || st.Failed != 1 || st.InProgress != 1 {
		t.Errorf("stats: entries %d completed %d failed %d in progress %d, want 3 1 1 1",
			st.Entries, st.Completed, st.Failed, st.InProgress)
	}
}

// deadWith claims j at now and ends it dead with error code code.
func deadWith(t *testing.T, s store.Store, j *idemtype.JobRow, code string, now time.Time) *idemtype.JobRow {
	t.Helper()
	r := claimJob(t, s, j, now)
	f := failure(r, idemtype.StateDead, idemtype.OutcomeDead, "fatal "+code, time.Time{}, now.Add(time.Second))
	f.ErrorCode = code
	finish1(t, s, f)
	return mustGet(t, s, j.ID)
}

func listIDs(t *testing.T, s store.Store, f store.JobFilter) []int64 {
	t.Helper()
	jobs, _, err := s.JobList(t.Context(), &store.JobListParams{Filter: f, Limit: 100})
	wantOK(t, "JobList", err)
	return sorted(ids(jobs))
}

func resolve(t *testing.T, s store.Store, id int64, note string, now time.Time) *idemtype.JobRow {
	t.Helper()
	j, err := s.JobResolve(t.Context(), &store.JobResolveParams{ID: id, Note: note, Now: now})
	wantOK(t, "JobResolve", err)
	return j
}

func testErrorCode(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	r := claimJob(t, s, j, at(0))
	f := failure(r, idemtype.StateRetryable, idemtype.OutcomeFailed, "timeout", at(time.Minute), at(time.Second))
	f.ErrorCode = "GEO_TIMEOUT"
	finish1(t, s, f)
	if got := mustGet(t, s, j.ID); got.ErrorCode != "GEO_TIMEOUT" || got.LastError != "timeout" {
		t.Fatalf("after a coded failure: code %q error %q", got.ErrorCode, got.LastError)
	}
	// The next failure without a code clears it: the code is the latest failure's.
	r = claimJob(t, s, j, at(2*time.Minute))
	finish1(t, s, failure(r, idemtype.StateDead, idemtype.OutcomeDead, "boom", time.Time{}, at(3*time.Minute)))
	if got := mustGet(t, s, j.ID); got.ErrorCode != "" || got.ResolvedAt != nil || got.ResolutionNote != "" {
		t.Fatalf("after an uncoded failure: code %q resolved %v note %q", got.ErrorCode, got.ResolvedAt, got.ResolutionNote)
	}
}

func testResolve(t *testing.T, s store.Store) {
	j := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "E1", at(0))
	got := resolve(t, s, j.ID, "fixed upstream", at(time.Hour))
	if got.State != idemtype.StateDead || got.ResolutionNote != "fixed upstream" || got.ErrorCode != "E1" {
		t.Fatalf("resolved job: state %s note %q code %q", got.State, got.ResolutionNote, got.ErrorCode)
	}
	wantTimeP(t, "ResolvedAt", got.ResolvedAt, at(time.Hour))
	again := resolve(t, s, j.ID, "second note", at(2*time.Hour))
	wantTimeP(t, "ResolvedAt after a repeat", again.ResolvedAt, at(time.Hour))
	if again.ResolutionNote != "fixed upstream" {
		t.Errorf("a repeat changed the note to %q", again.ResolutionNote)
	}
	wantTimeP(t, "ResolvedAt read back", mustGet(t, s, j.ID).ResolvedAt, at(time.Hour))
}

func testResolveRejects(t *testing.T, s store.Store) {
	done := completeJob(t, s, insert1(t, s, at(0), newJob("k")), at(0), `1`)
	dead := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "", at(0))
	live := insert1(t, s, at(0), newJob("k"))
	for _, c := range []struct {
		name   string
		p      *store.JobResolveParams
		target error
	}{
		{"available", &store.JobResolveParams{ID: live.ID, Now: at(time.Hour)}, idemtype.ErrWrongState},
		{"completed", &store.JobResolveParams{ID: done.ID, Now: at(time.Hour)}, idemtype.ErrWrongState},
		{"unknown", &store.JobResolveParams{ID: dead.ID + 1000, Now: at(time.Hour)}, idemtype.ErrNotFound},
		{"other tenant", &store.JobResolveParams{Tenant: "other", ID: dead.ID, Now: at(time.Hour)}, idemtype.ErrNotFound},
	} {
		_, err := s.JobResolve(t.Context(), c.p)
		if !errors.Is(err, c.target) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.target)
		}
	}
	for _, j := range []*idemtype.JobRow{live, done, dead} {
		if got := mustGet(t, s, j.ID); got.ResolvedAt != nil || got.ResolutionNote != "" {
			t.Errorf("job %d written by a refused resolve: %+v", j.ID, got)
		}
	}
}

func testListByCode(t *testing.T, s store.Store) {
	a := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "TIMEOUT", at(0))
	b := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "TIMEOUT", at(0))
	c := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "BAD_INPUT", at(0))
	resolve(t, s, b.ID, "", at(time.Hour))
	dead := []idemtype.JobState{idemtype.StateDead}
	yes, no := true, false
	wantIDs(t, "TIMEOUT", listIDs(t, s, store.JobFilter{States: dead, ErrorCode: "TIMEOUT"}), []int64{a.ID, b.ID})
	wantIDs(t, "unresolved TIMEOUT", listIDs(t, s, store.JobFilter{States: dead, ErrorCode: "TIMEOUT", Resolved: &no}), []int64{a.ID})
	wantIDs(t, "resolved", listIDs(t, s, store.JobFilter{States: dead, Resolved: &yes}), []int64{b.ID})
	wantIDs(t, "unresolved", listIDs(t, s, store.JobFilter{Resolved: &no}), []int64{a.ID, c.ID})
}

func testRequeueByCode(t *testing.T, s store.Store) {
	a := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "TIMEOUT", at(0))
	b := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "BAD_INPUT", at(0))
	resolve(t, s, a.ID, "will retry", at(time.Hour))
	moved, err := s.JobRetryMany(t.Context(), &store.JobRetryManyParams{Filter: store.JobFilter{ErrorCode: "TIMEOUT"},
		FromStates: []idemtype.JobState{idemtype.StateDead}, Now: at(2 * time.Hour)})
	wantOK(t, "JobRetryMany", err)
	wantIDs(t, "requeued", ids(moved), []int64{a.ID})
	got := wantState(t, s, a.ID, idemtype.StateAvailable)
	if got.ResolvedAt != nil || got.ResolutionNote != "" {
		t.Errorf("a requeued job keeps its resolution: %v %q", got.ResolvedAt, got.ResolutionNote)
	}
	wantState(t, s, b.ID, idemtype.StateDead)
}

func testStatsUnresolved(t *testing.T, s store.Store) {
	a := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "", at(0))
	deadWith(t, s, insert1(t, s, at(0), newJob("k")), "", at(0))
	resolve(t, s, a.ID, "", at(time.Hour))
	st, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Now: at(time.Hour)})
	wantOK(t, "QueueStats", err)
	if len(st) != 1 || st[0].Counts[idemtype.StateDead] != 2 || st[0].DeadUnresolved != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

// batchJobs returns insert params for n keyed jobs of a batch with key bkey.
func batchJobs(bkey string, n int) []*store.JobInsertParams {
	out := make([]*store.JobInsertParams, n)
	for i := range out {
		out[i] = keyed("upload", fmt.Sprintf("%s/%d", bkey, i), fmt.Sprintf("fp%d", i))
	}
	return out
}

func batchCreate(t *testing.T, s store.Store, key string, jobs []*store.JobInsertParams, now time.Time) *store.BatchCreateResult {
	t.Helper()
	r, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: key, Metadata: []byte(`{"files":3}`), Jobs: jobs, Now: now})
	wantOK(t, "BatchCreate", err)
	return r
}

func testBatchCreate(t *testing.T, s store.Store) {
	first := batchCreate(t, s, "B1", batchJobs("B1", 3), at(0))
	if first.Existing || len(first.Jobs) != 3 || first.Batch.ID == 0 || first.Batch.Key != "B1" {
		t.Fatalf("first create: %+v", first)
	}
	wantTime(t, "CreatedAt", first.Batch.CreatedAt, at(0))
	wantIDs(t, "batch jobs", listIDs(t, s, store.JobFilter{BatchID: first.Batch.ID}), sorted(ids([]*idemtype.JobRow{
		first.Jobs[0].Job, first.Jobs[1].Job, first.Jobs[2].Job})))
	again := batchCreate(t, s, "B1", batchJobs("B1", 5), at(time.Minute))
	if !again.Existing || again.Batch.ID != first.Batch.ID || again.Jobs != nil {
		t.Fatalf("repeat: %+v", again)
	}
	if n := len(listIDs(t, s, store.JobFilter{})); n != 3 {
		t.Fatalf("%d jobs after a repeated batch, want 3", n)
	}
	got, err := s.BatchGet(t.Context(), &store.BatchGetParams{Tenant: "default", ID: first.Batch.ID})
	wantOK(t, "BatchGet", err)
	if got.Key != "B1" || string(got.Metadata) != `{"files":3}` {
		t.Fatalf("BatchGet: %+v", got)
	}
	wantTime(t, "BatchGet CreatedAt", got.CreatedAt, at(0))
}

func testBatchCreateItemError(t *testing.T, s store.Store) {
	jobs := batchJobs("B2", 3)
	jobs[2].DependsOn = []int64{987654} // no such job
	_, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "B2", Jobs: jobs, Now: at(0)})
	if err == nil {
		t.Fatal("a batch with a bad item was created")
	}
	if n := len(listIDs(t, s, store.JobFilter{})); n != 0 {
		t.Fatalf("%d jobs written by a failed batch", n)
	}
	if _, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: "default", Key: "B2/0", Now: at(0)}); !errors.Is(err, idemtype.ErrNotFound) {
		t.Fatalf("a failed batch left a record: %v", err)
	}
	// The key is free: the corrected batch is created.
	if r := batchCreate(t, s, "B2", batchJobs("B2", 3), at(time.Second)); r.Existing || len(r.Jobs) != 3 {
		t.Fatalf("corrected batch: %+v", r)
	}
}

func testBatchRace(t *testing.T, s store.Store) {
	const creators, children = 16, 4
	var created atomic.Int32
	var batchID atomic.Int64
	err := parallel(creators, func(i int) error {
		r, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "R",
			Jobs: batchJobs("R", children), Now: at(0)})
		if err != nil {
			return err
		}
		if !r.Existing {
			created.Add(1)
		}
		if old := batchID.Swap(r.Batch.ID); old != 0 && old != r.Batch.ID {
			return fmt.Errorf("batch %d, another saw %d", r.Batch.ID, old)
		}
		return nil
	})
	wantOK(t, "concurrent BatchCreate", err)
	if n := created.Load(); n != 1 {
		t.Fatalf("%d creators created the batch, want 1", n)
	}
	if n := len(listIDs(t, s, store.JobFilter{})); n != children {
		t.Fatalf("%d jobs, want %d", n, children)
	}
	if n := len(listIDs(t, s, store.JobFilter{BatchID: batchID.Load()})); n != children {
		t.Fatalf("%d jobs in the batch, want %d", n, children)
	}
}

func testBatchGetNotFound(t *testing.T, s store.Store) {
	b := batchCreate(t, s, "B3", batchJobs("B3", 1), at(0))
	for _, p := range []*store.BatchGetParams{{Tenant: "other", ID: b.Batch.ID}, {ID: b.Batch.ID + 100}} {
		if _, err := s.BatchGet(t.Context(), p); !errors.Is(err, idemtype.ErrNotFound) {
			t.Errorf("BatchGet(%+v): %v, want ErrNotFound", p, err)
		}
	}
}

func testResolveRace(t *testing.T, s store.Store) {
	j := deadWith(t, s, insert1(t, s, at(0), newJob("k")), "E", at(0))
	const n = 8
	notes := make([]string, n)
	times := make([]time.Time, n)
	err := parallel(n, func(i int) error {
		r, err := s.JobResolve(t.Context(), &store.JobResolveParams{ID: j.ID, Note: fmt.Sprintf("note %d", i),
			Now: at(time.Hour + time.Duration(i)*time.Second)})
		if err != nil {
			return err
		}
		notes[i], times[i] = r.ResolutionNote, *r.ResolvedAt
		return nil
	})
	wantOK(t, "concurrent JobResolve", err)
	for i := range n {
		if notes[i] != notes[0] || !times[i].Equal(times[0]) {
			t.Fatalf("resolver %d saw %q at %v, resolver 0 %q at %v", i, notes[i], times[i], notes[0], times[0])
		}
	}
	got := mustGet(t, s, j.ID)
	if got.ResolutionNote != notes[0] || !got.ResolvedAt.Equal(times[0]) {
		t.Fatalf("stored %q at %v, resolvers saw %q at %v", got.ResolutionNote, got.ResolvedAt, notes[0], times[0])
	}
}
