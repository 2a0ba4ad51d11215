package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// A claim made with a LeaseToken gives that token to every job it takes,
// on every claim path (plain, several tenants, limited), and
// JobReleaseMany with ClaimToken gives back exactly the jobs still running
// under it: the recovery of a claim whose answer was lost.
func claimTokenCases() []testCase {
	return []testCase{
		{"JobClaim/lease_token_given", testClaimTokenGiven},
		{"JobReleaseMany/claim_token", testReleaseClaimToken},
		{"Race/cut_off_claims_given_back", testRaceCutClaimsGivenBack},
	}
}

// claimTok claims up to limit jobs of queue at now under token.
func claimTok(t *testing.T, s store.Store, now time.Time, limit int, queue, token string) []*idemtype.JobRow {
	t.Helper()
	return claimWith(t, s, &store.JobClaimParams{Queues: []string{queue}, WorkerID: "w1", Limit: limit,
		LeaseUntil: now.Add(lease), Now: now, LeaseToken: token})
}

// wantTokens checks that a claim took n jobs, each running under token in
// the claim's answer and in the store.
func wantTokens(t *testing.T, s store.Store, what string, jobs []*idemtype.JobRow, n int, token string) {
	t.Helper()
	if len(jobs) != n {
		t.Fatalf("%s: claimed %d jobs, want %d", what, len(jobs), n)
	}
	for _, j := range jobs {
		if j.LeaseToken != token {
			t.Errorf("%s: job %d answered with lease token %q, want %q", what, j.ID, j.LeaseToken, token)
		}
		if got := mustGet(t, s, j.ID); got.LeaseToken != token || got.State != idemtype.StateRunning {
			t.Errorf("%s: job %d is %s under %q, want running under %q", what, j.ID, got.State, got.LeaseToken, token)
		}
	}
}

func testClaimTokenGiven(t *testing.T, s store.Store) {
	// Plain claims: one tenant, no limits.
	insertNew(t, s, at(0), newJob("a"), newJob("a"), newJob("a"), newJob("a"))
	wantTokens(t, s, "plain claim", claimTok(t, s, at(0), 2, "default", "tok-plain"), 2, "tok-plain")
	// Without a token every job gets its own random one.
	rest := claim(t, s, at(0), 2)
	if len(rest) != 2 || rest[0].LeaseToken == "" || rest[0].LeaseToken == rest[1].LeaseToken ||
		rest[0].LeaseToken == "tok-plain" {
		t.Errorf("claim without a token: tokens %q", []string{rest[0].LeaseToken, rest[1].LeaseToken})
	}

	// Several tenants (the fair claim's rotation).
	insertTenantQueue(t, s, "t1", "multi", 3)
	insertTenantQueue(t, s, "t2", "multi", 3)
	got := claimTok(t, s, at(0), 4, "multi", "tok-multi")
	wantTokens(t, s, "claim over two tenants", got, 4, "tok-multi")
	if by := byTenant(got); by["t1"] != 2 || by["t2"] != 2 {
		t.Errorf("claim over two tenants took %v", by)
	}

	// Limits (the limited claim): a queue concurrency limit and a tenant's rate.
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Queue: "lim"}, Concurrency: 3})
	putLimit(t, s, store.Limit{FlowScope: store.FlowScope{Tenant: "t1", Queue: "lim"}, Rate: 100, Period: time.Minute})
	insertTenantQueue(t, s, "t1", "lim", 4)
	insertTenantQueue(t, s, "t2", "lim", 4)
	wantTokens(t, s, "limited claim", claimTok(t, s, at(0), 10, "lim", "tok-lim"), 3, "tok-lim")
}

// insertTenantQueue inserts n jobs of tenant in queue.
func insertTenantQueue(t *testing.T, s store.Store, tenant, queue string, n int) {
	t.Helper()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newJob("k")
		ps[i].Tenant, ps[i].Queue = tenant, queue
	}
	insertNew(t, s, at(0), ps...)
}

func testReleaseClaimToken(t *testing.T, s store.Store) {
	js := insertNew(t, s, at(0), keyed("k", "K", "fp"), newJob("k"), newJob("k"), newJob("k"), newJob("k"))
	lost := claimTok(t, s, at(0), 3, "default", "tok-lost")
	wantTokens(t, s, "claim", lost, 3, "tok-lost")
	other := claimTok(t, s, at(0), 1, "default", "tok-other")
	wantTokens(t, s, "other claim", other, 1, "tok-other")
	if lost[0].ID != js[0].ID {
		t.Fatalf("claim order: %v", ids(lost))
	}
	acquire(t, s, &store.RecordAcquireParams{Tenant: "default", Key: "K", Owner: store.JobOwner(js[0].ID), JobID: js[0].ID,
		LeaseUntil: at(time.Hour), Now: at(0)})
	// One job of the claim finished before the release (its answer did
	// reach someone): it stays completed.
	finish1(t, s, completion(lost[2], `1`, at(time.Second)))

	now := at(time.Minute)
	n, err := s.JobReleaseMany(t.Context(), &store.JobReleaseManyParams{ClaimToken: "tok-lost", Now: now})
	if err != nil {
		t.Fatalf("JobReleaseMany(ClaimToken): %v", err)
	}
	if n != 2 {
		t.Errorf("released %d, want 2", n)
	}
	for _, j := range lost[:2] {
		got := wantState(t, s, j.ID, idemtype.StateAvailable)
		wantTime(t, "RunAt", got.RunAt, now)
		if got.Attempt != 0 {
			t.Errorf("job %d: attempt %d after release, want 0", j.ID, got.Attempt)
		}
		wantNoLease(t, got)
		if as := attempts(t, s, j.ID); len(as) != 1 || as[0].Outcome != idemtype.OutcomeReleased {
			t.Errorf("job %d: attempts %s, want one released", j.ID, fmtAttempts(as))
		}
	}
	if r := record(t, s, "default", "K", now); r.LeaseOwner != "" {
		t.Errorf("record lease still held by %q", r.LeaseOwner)
	}
	wantState(t, s, lost[2].ID, idemtype.StateCompleted)
	wantState(t, s, other[0].ID, idemtype.StateRunning)

	// Again: nothing left under the token. A token nobody used, and an
	// empty one beside no leases, release nothing.
	for _, tok := range []string{"tok-lost", "tok-never"} {
		if n, err := s.JobReleaseMany(t.Context(), &store.JobReleaseManyParams{ClaimToken: tok, Now: now}); err != nil || n != 0 {
			t.Errorf("JobReleaseMany(ClaimToken %q) again = %d, %v; want 0", tok, n, err)
		}
	}
	if n, err := s.JobReleaseMany(t.Context(), &store.JobReleaseManyParams{Now: now}); err != nil || n != 0 {
		t.Errorf("JobReleaseMany() = %d, %v; want 0", n, err)
	}
	// Leases and a claim token in one call.
	again := claimTok(t, s, now, 2, "default", "tok-again")
	wantTokens(t, s, "claim after release", again, 2, "tok-again")
	n, err = s.JobReleaseMany(t.Context(), &store.JobReleaseManyParams{Leases: []store.Lease{leaseOf(other[0])},
		ClaimToken: "tok-again", Now: now})
	if err != nil || n != 3 {
		t.Errorf("JobReleaseMany(leases and token) = %d, %v; want 3", n, err)
	}
}
