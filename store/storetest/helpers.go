package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// base is the fixed "now" of the suite. It lies in the future and carries
// microseconds, so a backend that ignores the Now it is given, or loses
// precision, fails.
var base = time.Date(2031, time.March, 4, 5, 6, 7, 123456000, time.UTC)

// at returns base + d.
func at(d time.Duration) time.Time { return base.Add(d) }

// lease is the lease length the helpers claim with.
const lease = 5 * time.Minute

// hash returns the hex SHA-256 of s (fingerprints, result hashes).
func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// newJob returns insert params with the runtime's defaults filled in.
func newJob(kind string) *store.JobInsertParams {
	return &store.JobInsertParams{
		Tenant:      "default",
		Queue:       "default",
		Kind:        kind,
		Args:        json.RawMessage(`{}`),
		MaxAttempts: 3,
		RunAt:       base,
	}
}

// keyed returns insert params with an idempotency key, fingerprint fp, a
// one-hour dedup window and a one-day result TTL.
func keyed(kind, key, fp string) *store.JobInsertParams {
	p := newJob(kind)
	p.IdempotencyKey = key
	p.Fingerprint = hash(fp)
	p.DedupWindow = time.Hour
	p.ResultTTL = 24 * time.Hour
	return p
}

// insertAll inserts a batch and fails the test on a batch error.
func insertAll(t *testing.T, s store.Store, now time.Time, ps ...*store.JobInsertParams) []store.JobInsertResult {
	t.Helper()
	res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	if len(res) != len(ps) {
		t.Fatalf("JobInsertMany: %d results for %d items", len(res), len(ps))
	}
	return res
}

// insertNew inserts a batch whose items must all create new jobs.
func insertNew(t *testing.T, s store.Store, now time.Time, ps ...*store.JobInsertParams) []*idemtype.JobRow {
	t.Helper()
	res := insertAll(t, s, now, ps...)
	out := make([]*idemtype.JobRow, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("JobInsertMany item %d: %v", i, r.Err)
		}
		if r.Job == nil {
			t.Fatalf("JobInsertMany item %d: nil job", i)
		}
		if r.Existing {
			t.Fatalf("JobInsertMany item %d: Existing true for a new job", i)
		}
		out[i] = r.Job
	}
	return out
}

// insert1 inserts one job that must be new.
func insert1(t *testing.T, s store.Store, now time.Time, p *store.JobInsertParams) *idemtype.JobRow {
	t.Helper()
	return insertNew(t, s, now, p)[0]
}

// mustGet returns a job of any tenant.
func mustGet(t *testing.T, s store.Store, id int64) *idemtype.JobRow {
	t.Helper()
	j, err := s.JobGet(t.Context(), &store.JobGetParams{Tenant: "", ID: id})
	if err != nil {
		t.Fatalf("JobGet(%d): %v", id, err)
	}
	return j
}

// claimWith runs one claim and fails the test on an error.
func claimWith(t *testing.T, s store.Store, p *store.JobClaimParams) []*idemtype.JobRow {
	t.Helper()
	jobs, err := s.JobClaim(t.Context(), p)
	if err != nil {
		t.Fatalf("JobClaim: %v", err)
	}
	if len(jobs) > p.Limit {
		t.Fatalf("JobClaim returned %d jobs, limit %d", len(jobs), p.Limit)
	}
	return jobs
}

// claim claims up to limit jobs of queues at now (worker "w1").
func claim(t *testing.T, s store.Store, now time.Time, limit int, queues ...string) []*idemtype.JobRow {
	t.Helper()
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	return claimWith(t, s, &store.JobClaimParams{Queues: queues, WorkerID: "w1", Limit: limit,
		LeaseUntil: now.Add(lease), Now: now})
}

// claimJob claims exactly the job j (selected by its queue, tenant and
// kind, which the test keeps unique) at now.
func claimJob(t *testing.T, s store.Store, j *idemtype.JobRow, now time.Time) *idemtype.JobRow {
	t.Helper()
	got := claimWith(t, s, &store.JobClaimParams{Tenant: j.Tenant, Queues: []string{j.Queue},
		Kinds: []string{j.Kind}, WorkerID: "w1", Limit: 1, LeaseUntil: now.Add(lease), Now: now})
	if len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("claim of job %d (%s) at %v: got %v", j.ID, j.Kind, now, ids(got))
	}
	return got[0]
}

// finishAll runs JobFinishMany and fails the test on a batch error.
func finishAll(t *testing.T, s store.Store, ps ...*store.JobFinishParams) []error {
	t.Helper()
	errs, err := s.JobFinishMany(t.Context(), ps)
	if err != nil {
		t.Fatalf("JobFinishMany: %v", err)
	}
	if len(errs) != len(ps) {
		t.Fatalf("JobFinishMany: %d results for %d items", len(errs), len(ps))
	}
	return errs
}

// finish1 finishes one item, which must succeed.
func finish1(t *testing.T, s store.Store, p *store.JobFinishParams) {
	t.Helper()
	if err := finishAll(t, s, p)[0]; err != nil {
		t.Fatalf("JobFinishMany(job %d → %s): %v", p.ID, p.State, err)
	}
}

// completion returns the finish params completing a running job with
// result (also stored as the record result).
func completion(j *idemtype.JobRow, result string, fin time.Time) *store.JobFinishParams {
	return &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
		Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(result), FinishedAt: fin,
		DurationMS: 7, RecordResult: []byte(result), ResultHash: hash(result)}
}

// failure returns the finish params ending a running job's attempt in
// state with outcome, error msg and next run time runAt.
func failure(j *idemtype.JobRow, state idemtype.JobState, outcome idemtype.Outcome, msg string, runAt, fin time.Time) *store.JobFinishParams {
	return &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: state, Outcome: outcome,
		Error: msg, RunAt: runAt, FinishedAt: fin, DurationMS: 3}
}

// completeJob claims j at now and completes it at now+1s with result.
func completeJob(t *testing.T, s store.Store, j *idemtype.JobRow, now time.Time, result string) *idemtype.JobRow {
	t.Helper()
	r := claimJob(t, s, j, now)
	finish1(t, s, completion(r, result, now.Add(time.Second)))
	return mustGet(t, s, j.ID)
}

// killJob claims j at now and ends it dead at now+1s.
func killJob(t *testing.T, s store.Store, j *idemtype.JobRow, now time.Time) *idemtype.JobRow {
	t.Helper()
	r := claimJob(t, s, j, now)
	finish1(t, s, failure(r, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, now.Add(time.Second)))
	return mustGet(t, s, j.ID)
}

// cancelJob cancels j at now.
func cancelJob(t *testing.T, s store.Store, j *idemtype.JobRow, now time.Time) *idemtype.JobRow {
	t.Helper()
	got, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: j.ID, Reason: "user cancelled", Now: now})
	if err != nil {
		t.Fatalf("JobCancel(%d): %v", j.ID, err)
	}
	return got
}

// attempts lists a job's attempts (any tenant).
func attempts(t *testing.T, s store.Store, id int64) []*idemtype.Attempt {
	t.Helper()
	as, err := s.AttemptList(t.Context(), &store.AttemptListParams{Tenant: "", JobID: id})
	if err != nil {
		t.Fatalf("AttemptList(%d): %v", id, err)
	}
	return as
}

// record returns a live record, failing the test when there is none.
func record(t *testing.T, s store.Store, tenant, key string, now time.Time) *idemtype.Record {
	t.Helper()
	r, err := s.RecordGet(t.Context(), &store.RecordGetParams{Tenant: tenant, Key: key, Now: now})
	if err != nil {
		t.Fatalf("RecordGet(%s, %s, %v): %v", tenant, key, now, err)
	}
	return r
}

// ids returns the ids of jobs, in order.
func ids(jobs []*idemtype.JobRow) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// sorted returns a sorted copy of ids.
func sorted(in []int64) []int64 {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
}

// wantIDs checks got equals want in order.
func wantIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: ids %v, want %v", what, got, want)
	}
}

// wantIDSet checks got and want hold the same ids in any order.
func wantIDSet(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("%s: ids %v, want (any order) %v", what, got, want)
	}
}

// wantState checks the state of a job as stored.
func wantState(t *testing.T, s store.Store, id int64, want idemtype.JobState) *idemtype.JobRow {
	t.Helper()
	j := mustGet(t, s, id)
	if j.State != want {
		t.Errorf("job %d: state %s, want %s (last error %q)", id, j.State, want, j.LastError)
	}
	return j
}

// wantTime checks a time equals want and is in UTC.
func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	} else if got.Location() != time.UTC {
		t.Errorf("%s = %v: not in UTC", what, got)
	}
}

// wantTimeP checks an optional time is set and equals want.
func wantTimeP(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = nil, want %v", what, want)
		return
	}
	wantTime(t, what, *got, want)
}

// wantNil checks an optional time is not set.
func wantNil(t *testing.T, what string, got *time.Time) {
	t.Helper()
	if got != nil {
		t.Errorf("%s = %v, want nil", what, *got)
	}
}

// wantErr checks errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

// wantOK checks err is nil.
func wantOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// wantJSON checks a JSON value.
func wantJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !jsonEqual(got, []byte(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// wantNoLease checks a job holds no lease.
func wantNoLease(t *testing.T, j *idemtype.JobRow) {
	t.Helper()
	if j.LeaseToken != "" {
		t.Errorf("job %d (%s): LeaseToken %q, want none", j.ID, j.State, j.LeaseToken)
	}
	wantNil(t, "job "+strconv.FormatInt(j.ID, 10)+" LeaseExpiresAt", j.LeaseExpiresAt)
}

// wantMentions checks that text names the job id and, when given, a word.
func wantMentions(t *testing.T, what, text string, id int64, word string) {
	t.Helper()
	if !strings.Contains(text, strconv.FormatInt(id, 10)) {
		t.Errorf("%s = %q: does not name job %d", what, text, id)
	}
	if word != "" && !strings.Contains(text, word) {
		t.Errorf("%s = %q: does not say %q", what, text, word)
	}
}

// listAll lists every job matching f (following cursors).
func listAll(t *testing.T, s store.Store, f store.JobFilter) []*idemtype.JobRow {
	t.Helper()
	var out []*idemtype.JobRow
	cursor := int64(0)
	for range 1000 {
		jobs, next, err := s.JobList(t.Context(), &store.JobListParams{Filter: f, Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatalf("JobList: %v", err)
		}
		out = append(out, jobs...)
		if next == 0 {
			return out
		}
		cursor = next
	}
	t.Fatalf("JobList: cursor never reached the last page")
	return nil
}

// count returns Counts[state] of queue in stats (0 when absent).
func count(stats []*store.QueueStat, queue string, state idemtype.JobState) int64 {
	for _, q := range stats {
		if q.Queue == queue {
			return q.Counts[state]
		}
	}
	return 0
}

// queueStat returns the stat of queue, or nil.
func queueStat(stats []*store.QueueStat, queue string) *store.QueueStat {
	for _, q := range stats {
		if q.Queue == queue {
			return q
		}
	}
	return nil
}

// fmtAttempts renders attempts for error messages.
func fmtAttempts(as []*idemtype.Attempt) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "{#%d %s err=%q} ", a.Attempt, a.Outcome, a.Error)
	}
	return b.String()
}

// itoa formats an id.
func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// finishAs finishes the claimed job j as state at now: completed with the
// result {"ok":true}, or dead with the error "boom".
func finishAs(t *testing.T, s store.Store, j *idemtype.JobRow, state idemtype.JobState, now time.Time) {
	t.Helper()
	p := &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: state, FinishedAt: now,
		Outcome: idemtype.OutcomeCompleted, RunAt: now}
	if state == idemtype.StateCompleted {
		p.Result = json.RawMessage(`{"ok":true}`)
		p.RecordResult = []byte(`{"ok":true}`)
		p.ResultHash = "h"
	} else {
		p.Outcome, p.Error = idemtype.OutcomeDead, "boom"
	}
	errs, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{p})
	if err != nil || errs[0] != nil {
		t.Fatalf("JobFinishMany: %v %v", err, errs)
	}
}

// finishEach finishes fins in one JobFinishMany and returns its error or the
// first item's (for racing goroutines, which must not call t.Fatal).
func finishEach(t *testing.T, s store.Store, fins []*store.JobFinishParams) error {
	errs, err := s.JobFinishMany(t.Context(), fins)
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
