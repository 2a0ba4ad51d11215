package storetest

import (
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// testPromoteLimitAcrossQueues: JobPromote moves up to Limit due jobs in
// all (store.Maintenance), the earliest run_at first whatever their
// queues, so that a queue with a backlog of due jobs (one no worker
// claims) does not keep the promoter from the other queues' jobs. With
// migration 0031 the promoter walks jobs_due queue by queue: PostgreSQL's
// took up to Limit of every queue (a batch of Limit × queues jobs), and
// SQLite's the first Limit in queue order.
func testPromoteLimitAcrossQueues(t *testing.T, s store.Store) {
	mk := func(queue string, runAt time.Duration) *store.JobInsertParams {
		p := newJob("k")
		p.Queue, p.RunAt = queue, at(runAt)
		return p
	}
	// Queue "a" has the largest backlog, due after the others' jobs.
	var ps []*store.JobInsertParams
	for i := range 5 {
		ps = append(ps, mk("a", 3*time.Minute+time.Duration(i)*time.Second))
	}
	ps = append(ps, mk("b", 2*time.Minute), mk("c", time.Minute), mk("c", 4*time.Minute), mk("d", time.Hour))
	js := insertNew(t, s, at(0), ps...)
	as, b, c1, c2, d := js[:5], js[5], js[6], js[7], js[8]
	promote := func(limit int) {
		t.Helper()
		if _, err := s.JobPromote(t.Context(), &store.JobPromoteParams{Now: at(5 * time.Minute), Limit: limit}); err != nil {
			t.Fatalf("JobPromote: %v", err)
		}
	}
	states := func() map[int64]idemtype.JobState {
		out := map[int64]idemtype.JobState{}
		for _, j := range js {
			out[j.ID] = mustGet(t, s, j.ID).State
		}
		return out
	}
	promote(2)
	want := map[int64]idemtype.JobState{}
	for _, j := range js {
		want[j.ID] = idemtype.StateScheduled
	}
	want[c1.ID], want[b.ID] = idemtype.StateAvailable, idemtype.StateAvailable
	if got := states(); !sameStates(got, want) {
		t.Fatalf("after JobPromote(limit 2): %v, want the two earliest due (c %d at +1m, b %d at +2m) available: %v", got, c1.ID, b.ID, want)
	}
	promote(3)
	for _, j := range as[:3] {
		want[j.ID] = idemtype.StateAvailable
	}
	if got := states(); !sameStates(got, want) {
		t.Fatalf("after JobPromote(limit 3): %v, want a's three earliest available too: %v", got, want)
	}
	promote(10)
	for _, j := range as[3:] {
		want[j.ID] = idemtype.StateAvailable
	}
	want[c2.ID] = idemtype.StateAvailable
	if got := states(); !sameStates(got, want) {
		t.Fatalf("after JobPromote(limit 10): %v, want every due job available, d %d scheduled: %v", got, d.ID, want)
	}
}

func sameStates(a, b map[int64]idemtype.JobState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
