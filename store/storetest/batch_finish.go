package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// batchFinishCases are the completion jobs of batches (seed 001) and the
// dependency kind they use: run when every dependency finished, whatever
// the outcome (DependsOnFinished).
func batchFinishCases() []testCase {
	return []testCase{
		{"BatchCreate/on_finish_waits_for_every_child_any_outcome", testBatchOnFinish},
		{"BatchCreate/on_finish_failed_item_creates_nothing", testBatchOnFinishItemError},
		{"BatchCreate/on_finish_race_children_finish_at_once", testBatchOnFinishRace},
		{"JobInsertMany/depends_on_finished_any_outcome", testDependsOnFinished},
	}
}

// onFinishJob is the completion job the tests give their batches.
func onFinishJob() *store.JobInsertParams {
	p := newJob("report")
	p.Queue = "reports"
	p.Metadata = json.RawMessage(`{"owner":"ops"}`)
	return p
}

func batchWithOnFinish(t *testing.T, s store.Store, key string, n int, now time.Time) *store.BatchCreateResult {
	t.Helper()
	r, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: key,
		Jobs: batchJobs(key, n), OnFinish: onFinishJob(), Now: now})
	wantOK(t, "BatchCreate", err)
	if r.OnFinish == 0 || r.Batch.OnFinishJobID != r.OnFinish {
		t.Fatalf("BatchCreate: completion job %d, batch says %d", r.OnFinish, r.Batch.OnFinishJobID)
	}
	return r
}

func wantNoneClaimable(t *testing.T, s store.Store, now time.Time, queue string) {
	t.Helper()
	if got := claim(t, s, now, 10, queue); len(got) != 0 {
		t.Fatalf("claimed %v from %s, want none", ids(got), queue)
	}
}

func testBatchOnFinish(t *testing.T, s store.Store) {
	r := batchWithOnFinish(t, s, "F1", 3, at(0))
	of := wantState(t, s, r.OnFinish, idemtype.StatePending)
	children := []int64{r.Jobs[0].Job.ID, r.Jobs[1].Job.ID, r.Jobs[2].Job.ID}
	wantIDs(t, "completion job's dependencies", sorted(of.DependsOn), sorted(children))
	wantJSON(t, "completion job metadata", of.Metadata, fmt.Sprintf(`{"owner":"ops","idem_batch_id":%d}`, r.Batch.ID))
	if of.Queue != "reports" || of.Kind != "report" {
		t.Fatalf("completion job: queue %q kind %q", of.Queue, of.Kind)
	}
	// Not one of the batch's jobs.
	wantIDs(t, "batch jobs", listIDs(t, s, store.JobFilter{BatchID: r.Batch.ID}), sorted(children))
	got, err := s.BatchGet(t.Context(), &store.BatchGetParams{Tenant: "default", ID: r.Batch.ID})
	wantOK(t, "BatchGet", err)
	if got.OnFinishJobID != r.OnFinish {
		t.Fatalf("BatchGet: completion job %d, want %d", got.OnFinishJobID, r.OnFinish)
	}

	// One completed, one dead: still waiting.
	completeJob(t, s, r.Jobs[0].Job, at(time.Second), `{"ok":1}`)
	wantNoneClaimable(t, s, at(2*time.Second), "reports")
	killJob(t, s, r.Jobs[1].Job, at(3*time.Second))
	wantState(t, s, r.OnFinish, idemtype.StatePending)
	wantNoneClaimable(t, s, at(4*time.Second), "reports")
	// The last one cancelled: released, not cancelled.
	cancelJob(t, s, r.Jobs[2].Job, at(5*time.Second))
	wantState(t, s, r.OnFinish, idemtype.StateAvailable)
	c := claim(t, s, at(6*time.Second), 10, "reports")
	wantIDs(t, "claimed completion job", ids(c), []int64{r.OnFinish})

	// A repeat of the batch creates no second completion job.
	again, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "F1",
		Jobs: batchJobs("F1", 3), OnFinish: onFinishJob(), Now: at(time.Minute)})
	wantOK(t, "repeat BatchCreate", err)
	if !again.Existing || again.OnFinish != 0 || again.Batch.OnFinishJobID != r.OnFinish {
		t.Fatalf("repeat: existing %v, created %d, batch's %d (want %d)", again.Existing, again.OnFinish,
			again.Batch.OnFinishJobID, r.OnFinish)
	}
	if n := len(listIDs(t, s, store.JobFilter{})); n != 4 {
		t.Fatalf("%d jobs, want 3 children and 1 completion job", n)
	}
}

func testBatchOnFinishItemError(t *testing.T, s store.Store) {
	jobs := batchJobs("F2", 2)
	jobs[1].DependsOn = []int64{987654} // no such job
	_, err := s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "F2", Jobs: jobs,
		OnFinish: onFinishJob(), Now: at(0)})
	if err == nil {
		t.Fatal("a batch with a bad item was created")
	}
	if n := len(listIDs(t, s, store.JobFilter{})); n != 0 {
		t.Fatalf("%d jobs written by a failed batch", n)
	}
	// The completion job itself cannot be created: nothing is written.
	bad := onFinishJob()
	bad.Tenant = "other" // its dependencies are not in its tenant
	_, err = s.BatchCreate(t.Context(), &store.BatchCreateParams{Tenant: "default", Key: "F3",
		Jobs: batchJobs("F3", 2), OnFinish: bad, Now: at(0)})
	if err == nil {
		t.Fatal("a batch with a bad completion job was created")
	}
	if n := len(listIDs(t, s, store.JobFilter{})); n != 0 {
		t.Fatalf("%d jobs written by a failed batch", n)
	}
	if _, err := s.BatchGet(t.Context(), &store.BatchGetParams{ID: 1}); err == nil {
		t.Fatal("a failed batch was stored")
	}
}

// testBatchOnFinishRace finishes every child of a batch at once, each in
// its own transaction (some completed, some dead, some cancelled while
// running, their handlers then returning: the refused finish that ends the
// cancel's hold): the completion job must be released (exactly once: it
// is available, then claimed once).
func testBatchOnFinishRace(t *testing.T, s store.Store) {
	const rounds, children = 6, 6
	for round := range rounds {
		now := at(time.Duration(round) * time.Hour)
		key := fmt.Sprintf("FR%d", round)
		r := batchWithOnFinish(t, s, key, children, now)
		running := claim(t, s, now.Add(time.Second), children)
		if len(running) != children {
			t.Fatalf("round %d: claimed %d children, want %d", round, len(running), children)
		}
		err := parallel(children, func(i int) error {
			j := running[i]
			if (i+round)%3 == 2 { // cancelled while running, by another path
				if _, err := s.JobCancel(t.Context(), &store.JobCancelParams{ID: j.ID, Reason: "stop", Now: now.Add(2 * time.Second)}); err != nil {
					return err
				}
				// Its handler returns: the refused finish ends the hold.
				errs, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{completion(j, `{"ok":true}`, now.Add(2*time.Second))})
				if err != nil {
					return err
				}
				if !errors.Is(errs[0], idemtype.ErrLeaseLost) {
					return fmt.Errorf("finish of the cancelled child %d: %v, want ErrLeaseLost", j.ID, errs[0])
				}
				return nil
			}
			p := completion(j, `{"ok":true}`, now.Add(2*time.Second))
			if (i+round)%2 == 1 {
				p = failure(j, idemtype.StateDead, idemtype.OutcomeDead, "fatal", time.Time{}, now.Add(2*time.Second))
			}
			errs, err := s.JobFinishMany(t.Context(), []*store.JobFinishParams{p})
			if err != nil {
				return err
			}
			return errs[0]
		})
		wantOK(t, "concurrent finishes", err)
		wantState(t, s, r.OnFinish, idemtype.StateAvailable)
		got := claim(t, s, now.Add(3*time.Second), 10, "reports")
		wantIDs(t, fmt.Sprintf("round %d: claimed completion jobs", round), ids(got), []int64{r.OnFinish})
		finish1(t, s, completion(got[0], `{}`, now.Add(4*time.Second)))
	}
}

func testDependsOnFinished(t *testing.T, s store.Store) {
	a := insert1(t, s, at(0), newJob("a"))
	killJob(t, s, a, at(time.Second))
	// Inserted after its dependency died: available, not cancelled.
	late := newJob("late")
	late.DependsOn, late.DependsOnFinished = []int64{a.ID}, true
	wantState(t, s, insert1(t, s, at(2*time.Second), late).ID, idemtype.StateAvailable)

	// b dies: its plain dependant c is cancelled, its any-outcome
	// dependant d is released once e (completed) is finished too; f waits
	// for any outcome of c, cancelled transitively, and is released.
	b := insert1(t, s, at(0), newJob("b"))
	e := insert1(t, s, at(0), newJob("e"))
	c := newJob("c")
	c.DependsOn = []int64{b.ID}
	cj := insert1(t, s, at(0), c)
	d := newJob("d")
	d.DependsOn, d.DependsOnFinished = []int64{b.ID, e.ID}, true
	dj := insert1(t, s, at(0), d)
	f := newJob("f")
	f.DependsOn, f.DependsOnFinished = []int64{cj.ID}, true
	fj := insert1(t, s, at(0), f)
	for _, id := range []int64{cj.ID, dj.ID, fj.ID} {
		wantState(t, s, id, idemtype.StatePending)
	}
	killJob(t, s, b, at(3*time.Second))
	wantState(t, s, cj.ID, idemtype.StateCancelled)
	wantState(t, s, dj.ID, idemtype.StatePending)
	wantState(t, s, fj.ID, idemtype.StateAvailable)
	completeJob(t, s, e, at(4*time.Second), `{}`)
	wantState(t, s, dj.ID, idemtype.StateAvailable)
}
