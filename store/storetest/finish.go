package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

func heartbeatCases() []testCase {
	return []testCase{
		{"JobHeartbeatMany/extends_lease", testHeartbeatExtends},
		{"JobHeartbeatMany/lease_lost_per_item", testHeartbeatLost},
		{"JobHeartbeatMany/expired_lease_lost", testHeartbeatExpired},
		{"JobHeartbeatMany/absolute_stores_until_as_given", testHeartbeatAbsolute},
	}
}

func finishCases() []testCase {
	return []testCase{
		{"JobFinishMany/completed_sets_result_and_attempt", testFinishCompleted},
		{"JobFinishMany/completed_from_cache", testFinishCached},
		{"JobFinishMany/wrong_token_lease_lost", testFinishWrongToken},
		{"JobFinishMany/repeat_completion", testFinishRepeat},
		{"JobFinishMany/repeat_completion_is_json_equal", testFinishRepeatJSONEqual},
		{"JobFinishMany/repeat_failure", testFinishRepeatFailure},
		{"JobFinishMany/retryable", testFinishRetryable},
		{"JobFinishMany/snooze_does_not_count", testFinishSnooze},
		{"JobFinishMany/dead_sets_last_error", testFinishDead},
		{"JobFinishMany/cancelled", testFinishCancelled},
		{"JobFinishMany/items_independent", testFinishBatch},
		{"JobFinishMany/completion_releases_dependants", testFinishReleasesDependants},
		{"JobFinishMany/dead_cancels_dependants_transitively", testFinishDeadCancelsDependants},
		{"JobFinishMany/cancelled_cancels_dependants", testFinishCancelCancelsDependants},
		{"JobFinishMany/expired_lease_not_rescued_accepted", testFinishExpiredLease},
		{"AttemptList/completion_after_failure_and_snooze", testAttemptsCompletionHistory},
		{"JobFinishMany/one_job_twice_in_a_batch", testFinishSameJobTwice},
		{"JobFinishMany/refused_data_fails_alone", testFinishRefusedAlone},
		{"QueueStats/completions_counted_once", testStatsCompletionsOnce},
	}
}

// heartbeat runs JobHeartbeatMany and fails on a batch error.
func heartbeat(t *testing.T, s store.Store, until, now time.Time, leases ...store.Lease) []error {
	t.Helper()
	errs, err := s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatParams{Leases: leases, Until: until, Now: now})
	if err != nil {
		t.Fatalf("JobHeartbeatMany: %v", err)
	}
	if len(errs) != len(leases) {
		t.Fatalf("JobHeartbeatMany: %d results for %d leases", len(errs), len(leases))
	}
	return errs
}

// leaseOf returns the lease of a running job.
func leaseOf(j *idemtype.JobRow) store.Lease { return store.Lease{ID: j.ID, Token: j.LeaseToken} }

func testHeartbeatExtends(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 2)
	errs := heartbeat(t, s, at(10*time.Minute), at(time.Minute), leaseOf(c[0]), leaseOf(c[1]))
	for i, j := range c {
		wantOK(t, "heartbeat", errs[i])
		got := wantState(t, s, j.ID, idemtype.StateRunning)
		wantTimeP(t, "LeaseExpiresAt after heartbeat", got.LeaseExpiresAt, at(10*time.Minute))
		if got.LeaseToken != j.LeaseToken {
			t.Errorf("heartbeat changed the token")
		}
	}
}

// testHeartbeatAbsolute: a heartbeat with Absolute stores Until itself,
// truncated to microseconds, even when it shortens the lease (a pull
// claim's cap at the job's timeout deadline), and reports it in Ends when
// it fills them.
func testHeartbeatAbsolute(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 2)
	until := at(30*time.Second + 1500*time.Nanosecond)
	want := until.Truncate(time.Microsecond)
	ends := make([]time.Time, 2)
	errs, err := s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatParams{Leases: []store.Lease{leaseOf(c[0]), leaseOf(c[1])},
		Until: until, Now: at(10 * time.Second), Absolute: true, Ends: ends})
	if err != nil {
		t.Fatalf("JobHeartbeatMany: %v", err)
	}
	if len(errs) != 2 {
		t.Fatalf("JobHeartbeatMany: %d results for 2 leases", len(errs))
	}
	for i, j := range c {
		wantOK(t, "heartbeat", errs[i])
		wantTimeP(t, "LeaseExpiresAt after an absolute heartbeat", wantState(t, s, j.ID, idemtype.StateRunning).LeaseExpiresAt, want)
		if !ends[i].IsZero() {
			wantTime(t, "the end reported stored", ends[i], want)
		}
	}
}

func testHeartbeatLost(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 3)
	finish1(t, s, completion(c[2], `1`, at(time.Second)))
	errs := heartbeat(t, s, at(10*time.Minute), at(time.Minute),
		leaseOf(c[0]),
		store.Lease{ID: c[1].ID, Token: "not-the-token"},
		leaseOf(c[2]),
		store.Lease{ID: c[2].ID + 1000, Token: c[0].LeaseToken})
	wantOK(t, "valid lease", errs[0])
	wantErr(t, "wrong token", errs[1], idemtype.ErrLeaseLost)
	wantErr(t, "finished job", errs[2], idemtype.ErrLeaseLost)
	wantErr(t, "unknown job", errs[3], idemtype.ErrLeaseLost)
	wantTimeP(t, "extended lease", mustGet(t, s, c[0].ID).LeaseExpiresAt, at(10*time.Minute))
	wantTimeP(t, "lease of the wrong token", mustGet(t, s, c[1].ID).LeaseExpiresAt, at(lease))
}

func testFinishCompleted(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w9", Limit: 1,
		LeaseUntil: at(time.Hour), Now: at(time.Second)})[0]
	p := completion(c, `{"ok":true,"n":[1,2]}`, at(3*time.Second))
	p.DurationMS = 2000
	p.HTTPStatus = 200
	p.Target = "https://example.test/hook"
	finish1(t, s, p)
	got := wantState(t, s, j.ID, idemtype.StateCompleted)
	wantJSON(t, "Result", got.Result, `{"ok":true,"n":[1,2]}`)
	wantTimeP(t, "FinishedAt", got.FinishedAt, at(3*time.Second))
	wantTimeP(t, "StartedAt", got.StartedAt, at(time.Second))
	if got.Attempt != 1 || got.WasCached || got.OriginalJobID != 0 || got.LastError != "" {
		t.Errorf("attempt %d was_cached %v original %d last_error %q", got.Attempt, got.WasCached, got.OriginalJobID, got.LastError)
	}
	wantNoLease(t, got)
	as := attempts(t, s, j.ID)
	if len(as) != 1 {
		t.Fatalf("%d attempts, want 1", len(as))
	}
	a := as[0]
	wantTime(t, "attempt StartedAt", a.StartedAt, at(time.Second))
	wantTimeP(t, "attempt FinishedAt", a.FinishedAt, at(3*time.Second))
	if a.Attempt != 1 || a.DurationMS != 2000 || a.Outcome != idemtype.OutcomeCompleted || a.Error != "" ||
		a.HTTPStatus != 200 || a.Target != "https://example.test/hook" || a.WorkerID != "w9" {
		t.Errorf("attempt %+v", a)
	}
}

func testFinishCached(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	p := completion(c, `"cached"`, at(time.Second))
	p.WasCached, p.OriginalJobID, p.Outcome = true, 4242, idemtype.OutcomeCached
	finish1(t, s, p)
	got := wantState(t, s, j.ID, idemtype.StateCompleted)
	if !got.WasCached || got.OriginalJobID != 4242 {
		t.Errorf("WasCached %v OriginalJobID %d, want true 4242", got.WasCached, got.OriginalJobID)
	}
	wantJSON(t, "Result", got.Result, `"cached"`)
	if as := attempts(t, s, j.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeCached {
		t.Errorf("attempts %s, want one cached", fmtAttempts(as))
	}
}

func testFinishWrongToken(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), newJob("run"), newJob("idle"))
	c := claimJob(t, s, js[0], at(0))
	p := completion(c, `1`, at(time.Second))
	p.LeaseToken = "not-the-token"
	wantErr(t, "finish with a wrong token", finishAll(t, s, p)[0], idemtype.ErrLeaseLost)
	got := wantState(t, s, c.ID, idemtype.StateRunning)
	if got.Result != nil || got.LeaseToken != c.LeaseToken {
		t.Errorf("a refused finish changed the job: result %s token %q", got.Result, got.LeaseToken)
	}
	idle := completion(js[1], `1`, at(time.Second))
	wantErr(t, "finish of an unclaimed job", finishAll(t, s, idle)[0], idemtype.ErrLeaseLost)
	wantState(t, s, js[1].ID, idemtype.StateAvailable)
	unknown := completion(c, `1`, at(time.Second))
	unknown.ID += 1000
	wantErr(t, "finish of an unknown job", finishAll(t, s, unknown)[0], idemtype.ErrLeaseLost)
}

func testFinishRepeat(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	first := completion(c, `{"a":1}`, at(time.Second))
	first.Repeated = true // the store decides it, whatever the caller set
	finish1(t, s, first)
	if first.Repeated {
		t.Error("the first completion is marked Repeated")
	}
	repeat := completion(c, `{"a":1}`, at(2*time.Second))
	wantOK(t, "repeat with the same token and result", finishAll(t, s, repeat)[0])
	if !repeat.Repeated {
		t.Error("a repeated completion is not marked Repeated: callers would count it twice")
	}
	// JSON-equal, not byte-equal: whitespace does not matter.
	wantOK(t, "repeat with whitespace", finishAll(t, s, completion(c, " {\n  \"a\" : 1 }\n", at(2*time.Second)))[0])
	wantErr(t, "repeat with another result", finishAll(t, s, completion(c, `{"a":2}`, at(2*time.Second)))[0], idemtype.ErrLeaseLost)
	other := completion(c, `{"a":1}`, at(2*time.Second))
	other.LeaseToken = "another-token"
	wantErr(t, "repeat with another token", finishAll(t, s, other)[0], idemtype.ErrLeaseLost)
	got := wantState(t, s, j.ID, idemtype.StateCompleted)
	wantJSON(t, "Result", got.Result, `{"a":1}`)
	wantTimeP(t, "FinishedAt", got.FinishedAt, at(time.Second))
	if as := attempts(t, s, j.ID); len(as) != 1 {
		t.Errorf("%d attempts after repeats, want 1", len(as))
	}
}

func testFinishRetryable(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	p := failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(5*time.Minute), at(2*time.Second))
	p.HTTPStatus = 503
	finish1(t, s, p)
	got := wantState(t, s, j.ID, idemtype.StateRetryable)
	wantTime(t, "RunAt", got.RunAt, at(5*time.Minute))
	wantNil(t, "FinishedAt of a retryable job", got.FinishedAt)
	if got.LastError != "boom" || got.Attempt != 1 || got.Result != nil {
		t.Errorf("last error %q attempt %d result %s", got.LastError, got.Attempt, got.Result)
	}
	wantNoLease(t, got)
	as := attempts(t, s, j.ID)
	if len(as) != 1 || as[0].Outcome != idemtype.OutcomeFailed || as[0].Error != "boom" || as[0].HTTPStatus != 503 || as[0].DurationMS != 3 {
		t.Errorf("attempts %+v", as)
	} else {
		wantTimeP(t, "attempt FinishedAt", as[0].FinishedAt, at(2*time.Second))
	}
	// retry after 0: claimable at once.
	c = claimJob(t, s, j, at(5*time.Minute))
	finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "again", at(6*time.Minute), at(6*time.Minute)))
	claimJob(t, s, j, at(6*time.Minute))
}

func testFinishSnooze(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	p := failure(c, idemtype.StateScheduled, idemtype.OutcomeSnoozed, "", at(10*time.Minute), at(time.Second))
	p.Snooze = true
	finish1(t, s, p)
	got := wantState(t, s, j.ID, idemtype.StateScheduled)
	if got.Attempt != 0 {
		t.Errorf("Attempt %d after a snooze, want 0", got.Attempt)
	}
	wantTime(t, "RunAt", got.RunAt, at(10*time.Minute))
	wantNil(t, "FinishedAt", got.FinishedAt)
	wantNoLease(t, got)
	if n := len(claim(t, s, at(9*time.Minute), 10)); n != 0 {
		t.Errorf("snoozed job claimed before its RunAt")
	}
	c = claimJob(t, s, j, at(10*time.Minute))
	if c.Attempt != 1 {
		t.Errorf("Attempt %d on the claim after a snooze, want 1", c.Attempt)
	}
	as := attempts(t, s, j.ID)
	if len(as) != 2 || as[0].Outcome != idemtype.OutcomeSnoozed || as[1].Outcome != idemtype.OutcomeRunning ||
		as[0].Attempt != 1 || as[1].Attempt != 1 {
		t.Errorf("attempts %s, want #1 snoozed then #1 running", fmtAttempts(as))
	}
}

func testFinishDead(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	finish1(t, s, failure(c, idemtype.StateDead, idemtype.OutcomeDead, "fatal: bad input", time.Time{}, at(time.Second)))
	got := wantState(t, s, j.ID, idemtype.StateDead)
	if got.LastError != "fatal: bad input" || got.Result != nil {
		t.Errorf("LastError %q Result %s", got.LastError, got.Result)
	}
	wantTimeP(t, "FinishedAt", got.FinishedAt, at(time.Second))
	wantNoLease(t, got)
	if as := attempts(t, s, j.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeDead || as[0].Error != "fatal: bad input" {
		t.Errorf("attempts %s", fmtAttempts(as))
	}
}

func testFinishCancelled(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	finish1(t, s, failure(c, idemtype.StateCancelled, idemtype.OutcomeCancelled, "handler cancelled", time.Time{}, at(time.Second)))
	got := wantState(t, s, j.ID, idemtype.StateCancelled)
	wantTimeP(t, "FinishedAt", got.FinishedAt, at(time.Second))
	if got.LastError != "handler cancelled" {
		t.Errorf("LastError %q", got.LastError)
	}
	wantNoLease(t, got)
}

func testFinishBatch(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 3)
	bad := completion(c[1], `2`, at(time.Second))
	bad.LeaseToken = "wrong"
	errs := finishAll(t, s, completion(c[0], `1`, at(time.Second)), bad,
		failure(c[2], idemtype.StateDead, idemtype.OutcomeDead, "x", time.Time{}, at(time.Second)))
	wantOK(t, "item 0", errs[0])
	wantErr(t, "item 1", errs[1], idemtype.ErrLeaseLost)
	wantOK(t, "item 2", errs[2])
	wantState(t, s, c[0].ID, idemtype.StateCompleted)
	wantState(t, s, c[1].ID, idemtype.StateRunning)
	wantState(t, s, c[2].ID, idemtype.StateDead)
}

// dependsOn returns params of a job depending on deps.
func dependsOn(kind string, deps ...*idemtype.JobRow) *store.JobInsertParams {
	p := newJob(kind)
	p.DependsOn = ids(deps)
	return p
}

func testFinishReleasesDependants(t *testing.T, s store.Store) {
	ab := insertNew(t, s, at(0), newJob("a"), newJob("b"))
	a, b := ab[0], ab[1]
	dp := dependsOn("d", a)
	dp.RunAt = at(time.Hour)
	cd := insertNew(t, s, at(0), dependsOn("c", a, b), dp)
	c, d := cd[0], cd[1]
	e := insert1(t, s, at(0), dependsOn("e", c))
	completeJob(t, s, a, at(time.Minute), `1`)
	wantState(t, s, c.ID, idemtype.StatePending)
	wantState(t, s, d.ID, idemtype.StateScheduled)
	wantState(t, s, e.ID, idemtype.StatePending)
	completeJob(t, s, b, at(2*time.Minute), `1`)
	wantState(t, s, c.ID, idemtype.StateAvailable)
	wantState(t, s, e.ID, idemtype.StatePending)
	wantIDs(t, "claimable after both dependencies", ids(claim(t, s, at(3*time.Minute), 10)), []int64{c.ID})
	wantIDs(t, "scheduled dependant at its RunAt", ids(claim(t, s, at(time.Hour), 10)), []int64{d.ID})
}

func testFinishDeadCancelsDependants(t *testing.T, s store.Store) {
	ax := insertNew(t, s, at(0), newJob("a"), newJob("x"))
	a, x := ax[0], ax[1]
	b := insert1(t, s, at(0), dependsOn("b", a))
	c := insert1(t, s, at(0), dependsOn("c", b))
	d := insert1(t, s, at(0), dependsOn("d", x, a))
	y := insert1(t, s, at(0), dependsOn("y", x))
	killJob(t, s, a, at(time.Minute))
	checkCancelledDependants(t, s, a, "dead", at(time.Minute+time.Second), b, c, d)
	wantState(t, s, x.ID, idemtype.StateAvailable)
	wantState(t, s, y.ID, idemtype.StatePending)
}

func testFinishCancelCancelsDependants(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	b := insert1(t, s, at(0), dependsOn("b", a))
	c := insert1(t, s, at(0), dependsOn("c", b))
	r := claimJob(t, s, a, at(0))
	finish1(t, s, failure(r, idemtype.StateCancelled, idemtype.OutcomeCancelled, "stop", time.Time{}, at(time.Second)))
	checkCancelledDependants(t, s, a, "cancelled", at(time.Second), b, c)
}

// checkCancelledDependants checks that the chain of dependants of root was
// cancelled at fin: the first names root and its state, the others name
// their dependency (or the root).
func checkCancelledDependants(t *testing.T, s store.Store, root *idemtype.JobRow, rootState string, fin time.Time, deps ...*idemtype.JobRow) {
	t.Helper()
	for i, d := range deps {
		got := wantState(t, s, d.ID, idemtype.StateCancelled)
		wantTimeP(t, "FinishedAt of a cancelled dependant", got.FinishedAt, fin)
		if i == 0 || d.DependsOn[len(d.DependsOn)-1] == root.ID {
			wantMentions(t, "LastError of a direct dependant", got.LastError, root.ID, rootState)
			continue
		}
		if got.LastError == "" || !(strings.Contains(got.LastError, itoa(d.DependsOn[0])) || strings.Contains(got.LastError, itoa(root.ID))) {
			t.Errorf("LastError of transitive dependant %d = %q: names neither its dependency %d nor %d", d.ID, got.LastError, d.DependsOn[0], root.ID)
		}
	}
}

func testHeartbeatExpired(t *testing.T, s store.Store) {
	insertNew(t, s, at(0), newJob("k"), newJob("k"))
	c := claim(t, s, at(0), 2) // leases until at(lease)
	errs := heartbeat(t, s, at(lease+10*time.Minute), at(lease), leaseOf(c[0]))
	wantErr(t, "heartbeat at the lease expiry", errs[0], idemtype.ErrLeaseLost)
	got := wantState(t, s, c[0].ID, idemtype.StateRunning)
	wantTimeP(t, "LeaseExpiresAt after a refused heartbeat", got.LeaseExpiresAt, at(lease))
	wantOK(t, "heartbeat just before the expiry",
		heartbeat(t, s, at(lease+10*time.Minute), at(lease-time.Microsecond), leaseOf(c[1]))[0])
}

func testFinishExpiredLease(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), keyed("k", "K", "fp"))
	c := claimJob(t, s, j, at(0))
	fin := at(lease + time.Minute) // expired, not rescued
	finish1(t, s, completion(c, `"late"`, fin))
	got := wantState(t, s, j.ID, idemtype.StateCompleted)
	wantJSON(t, "Result of a late completion", got.Result, `"late"`)
	wantNoLease(t, got)
	if as := attempts(t, s, j.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeCompleted {
		t.Errorf("attempts %s, want one completed", fmtAttempts(as))
	}
	if r := record(t, s, "default", "K", fin); r.Status != idemtype.RecordCompleted || r.ResultJobID != j.ID {
		t.Errorf("record after a late completion: status %s result job %d", r.Status, r.ResultJobID)
	}
	if got := rescue(t, s, fin.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("rescued %v after the late completion", got)
	}
}

func testFinishRepeatJSONEqual(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(0))
	finish1(t, s, completion(c, `{"a":1,"b":[1,2],"c":{"x":"y","z":null}}`, at(time.Second)))
	for _, res := range []string{
		`{"c":{"z":null,"x":"y"},"b":[1,2],"a":1}`,
		"{ \"a\": 1,\n\t\"b\": [ 1, 2 ], \"c\": {\"x\": \"y\", \"z\": null} }",
	} {
		wantOK(t, "repeat with "+res, finishAll(t, s, completion(c, res, at(2*time.Second)))[0])
	}
	for _, res := range []string{
		`{"a":1,"b":[2,1],"c":{"x":"y","z":null}}`, // array order matters
		`{"a":1,"b":[1,2],"c":{"x":"y"}}`,          // a missing null is another value
		`{"a":"1","b":[1,2],"c":{"x":"y","z":null}}`,
	} {
		wantErr(t, "repeat with "+res, finishAll(t, s, completion(c, res, at(2*time.Second)))[0], idemtype.ErrLeaseLost)
	}
}

// testAttemptsCompletionHistory: a job that failed once, was snoozed and
// then completed lists its three attempts in order, the completion last
// with its own attempt number, start, finish, worker and handler duration
// (the completion is kept in the job row, the others as attempt rows:
// docs/state-machine.md, "Attempts"). A cached completion reads "cached".
func testAttemptsCompletionHistory(t *testing.T, s store.Store) {
	j := insert1(t, s, at(0), newJob("k"))
	c := claimJob(t, s, j, at(time.Second))
	finish1(t, s, failure(c, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(time.Minute), at(2*time.Second)))
	c = claimJob(t, s, j, at(time.Minute))
	sn := failure(c, idemtype.StateScheduled, idemtype.OutcomeSnoozed, "", at(2*time.Minute), at(time.Minute+time.Second))
	sn.Snooze = true
	finish1(t, s, sn)
	c = claimWith(t, s, &store.JobClaimParams{Queues: []string{"default"}, WorkerID: "w-last", Limit: 1,
		LeaseUntil: at(time.Hour), Now: at(2 * time.Minute)})[0]
	p := completion(c, `{"done":1}`, at(2*time.Minute+3*time.Second))
	p.DurationMS = 2900
	finish1(t, s, p)
	as := attempts(t, s, j.ID)
	if len(as) != 3 {
		t.Fatalf("%d attempts, want failed, snoozed, completed: %s", len(as), fmtAttempts(as))
	}
	if as[0].Outcome != idemtype.OutcomeFailed || as[1].Outcome != idemtype.OutcomeSnoozed {
		t.Errorf("attempts %s, want failed then snoozed first", fmtAttempts(as))
	}
	last := as[2]
	if last.Outcome != idemtype.OutcomeCompleted || last.Attempt != 2 || last.DurationMS != 2900 ||
		last.WorkerID != "w-last" || last.Error != "" || last.Target != "" || last.HTTPStatus != 0 {
		t.Errorf("completion attempt %+v, want attempt 2 completed by w-last in 2900 ms", last)
	}
	wantTime(t, "completion StartedAt", last.StartedAt, at(2*time.Minute))
	wantTimeP(t, "completion FinishedAt", last.FinishedAt, at(2*time.Minute+3*time.Second))

	k := insert1(t, s, at(0), newJob("k"))
	kc := claimJob(t, s, k, at(time.Second))
	cp := completion(kc, `1`, at(2*time.Second))
	cp.Outcome, cp.WasCached, cp.OriginalJobID = idemtype.OutcomeCached, true, j.ID
	finish1(t, s, cp)
	if ks := attempts(t, s, k.ID); len(ks) != 1 || ks[0].Outcome != idemtype.OutcomeCached {
		t.Errorf("cached completion attempts %s, want one cached", fmtAttempts(ks))
	}
}

// testStatsCompletionsOnce: the per-minute completion count counts each
// completed job once, whether its completion is kept in the job row or
// (a delivery, with a target) also as an attempt row, and failures from
// attempt rows.
func testStatsCompletionsOnce(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("k"))
	b := insert1(t, s, at(0), newJob("k"))
	f := insert1(t, s, at(0), newJob("k"))
	completeJob(t, s, a, at(time.Second), `1`)
	cb := claimJob(t, s, b, at(time.Second))
	p := completion(cb, `1`, at(2*time.Second))
	p.Target, p.HTTPStatus = "https://example.test/hook", 200
	finish1(t, s, p)
	cf := claimJob(t, s, f, at(time.Second))
	finish1(t, s, failure(cf, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(time.Hour), at(2*time.Second)))
	stats, err := s.QueueStats(t.Context(), &store.QueueStatsParams{Now: at(30 * time.Second)})
	if err != nil {
		t.Fatalf("QueueStats: %v", err)
	}
	q := queueStat(stats, "default")
	if q == nil || q.Completed1m != 2 || q.Failed1m != 1 {
		t.Fatalf("stats %+v, want 2 completed and 1 failed in the last minute", q)
	}
}

// testFinishSameJobTwice: a batch that names one job twice (a retry, then a
// completion under the same, now spent, token) applies the items in order:
// the retry with its run time, then lease-lost for the second, and the
// other items as usual.
func testFinishSameJobTwice(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("k"))
	b := insert1(t, s, at(0), newJob("k"))
	ca := claimJob(t, s, a, at(time.Second))
	cb := claimJob(t, s, b, at(time.Second))
	retry := failure(ca, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom", at(10*time.Minute), at(2*time.Second))
	errs := finishAll(t, s, retry, completion(ca, `1`, at(3*time.Second)), completion(cb, `2`, at(3*time.Second)))
	if errs[0] != nil || !errors.Is(errs[1], idemtype.ErrLeaseLost) || errs[2] != nil {
		t.Fatalf("errors %v, want nil, lease lost, nil", errs)
	}
	got := wantState(t, s, a.ID, idemtype.StateRetryable)
	wantTime(t, "RunAt of the retried job", got.RunAt, at(10*time.Minute))
	if got.LastError != "boom" || got.Result != nil {
		t.Errorf("retried job: last error %q result %s", got.LastError, got.Result)
	}
	wantState(t, s, b.ID, idemtype.StateCompleted)
	if as := attempts(t, s, a.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeFailed {
		t.Errorf("attempts of the retried job %s, want one failed", fmtAttempts(as))
	}
}
