package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// deletedKey inserts a keyed job of key at at(0) (window 1 h, result TTL
// 24 h), ends it — completed at at(1m+1s) with the result "R" when done,
// else dead — and deletes it (JobDelete, as DELETE /v1/dlq/{id} does)
// while the key's window is open (until at(1h)). It returns the deleted
// job.
func deletedKey(t *testing.T, s store.Store, key string, done bool) *idemtype.JobRow {
	t.Helper()
	j := insert1(t, s, at(0), keyed("k-"+key, key, "fp"))
	state := idemtype.StateDead
	if done {
		completeJob(t, s, j, at(time.Minute), `"R"`)
		state = idemtype.StateCompleted
	} else {
		killJob(t, s, j, at(time.Minute))
	}
	if err := s.JobDelete(t.Context(), &store.JobDeleteParams{Tenant: "default", ID: j.ID, State: state}); err != nil {
		t.Fatalf("JobDelete of job %d (%s): %v", j.ID, state, err)
	}
	return j
}

// wantDeletedKeyRecord checks the record of key after its deleted job old
// (deletedKey) was replaced by job id, created at now with fingerprint fp
// (window 1 h, result TTL 24 h): the record names the new job, its window
// is the new job's, and it holds what it cached before — nothing for a dead
// job; for a completed one its result, which lives until its own expiry.
func wantDeletedKeyRecord(t *testing.T, s store.Store, key string, old *idemtype.JobRow, done bool, id int64, fp string, now time.Time) {
	t.Helper()
	r := record(t, s, "default", key, now)
	if r.JobID != id || r.Fingerprint != hash(fp) {
		t.Errorf("%s: record names job %d (fingerprint %.8s), want the new job %d (%.8s)", key, r.JobID, r.Fingerprint, id, hash(fp))
	}
	wantTimeP(t, key+": DedupUntil", r.DedupUntil, now.Add(time.Hour))
	if !done {
		if r.Status != idemtype.RecordInProgress || r.Result != nil || r.ResultJobID != 0 || r.CompletedAt != nil {
			t.Errorf("%s: record of a dead deleted job after the new insert: %+v", key, r)
		}
		wantTimeP(t, key+": ExpiresAt", r.ExpiresAt, now.Add(time.Hour))
		return
	}
	fin := at(time.Minute + time.Second)
	if r.Status != idemtype.RecordCompleted || string(r.Result) != `"R"` || r.ResultHash != hash(`"R"`) || r.ResultJobID != old.ID {
		t.Errorf("%s: record of a completed deleted job after the new insert: status %s result %s hash %.8s result job %d, "+
			"want completed \"R\" of job %d", key, r.Status, r.Result, r.ResultHash, r.ResultJobID, old.ID)
	}
	wantTimeP(t, key+": CompletedAt", r.CompletedAt, fin)
	wantTimeP(t, key+": ExpiresAt (the result's)", r.ExpiresAt, fin.Add(24*time.Hour))
}

// testKeyOfDeletedJob: a keyed job is deleted (JobDelete) while its key's
// dedup window is open; the same request enqueued again creates a new job
// (it does not answer with the deleted job, nor fail), whatever path the
// insert takes — alone, in a batch with other keys and a repeat of the key
// (the repeat gets the new job), or in a batch large enough for a
// backend's bulk path — and also for another fingerprint. The record then
// names the new job and keeps what it cached: nothing when the deleted job
// was dead; when it had completed, its result, until that result's own
// expiry (as when a closed window is reopened). The new job's key is then
// in its window: the request again gets it.
func testKeyOfDeletedJob(t *testing.T, s store.Store) {
	now := at(2 * time.Minute) // the deleted jobs' windows are open until at(1h)
	for _, done := range []bool{false, true} {
		end := map[bool]string{false: "DEAD", true: "DONE"}[done]

		// Alone, same request.
		key := end + "-alone"
		old := deletedKey(t, s, key, done)
		res := insertAll(t, s, now, keyed("k-"+key, key, "fp"))[0]
		if res.Err != nil || res.Existing || res.Job == nil || res.Job.ID == old.ID {
			t.Fatalf("%s: insert after its job %d was deleted: %+v", key, old.ID, res)
		}
		wantDeletedKeyRecord(t, s, key, old, done, res.Job.ID, "fp", now)
		again := insertAll(t, s, now.Add(time.Minute), keyed("k-"+key, key, "fp"))[0]
		if again.Err != nil || !again.Existing || again.Job == nil || again.Job.ID != res.Job.ID {
			t.Errorf("%s: repeat after the new job: %+v, want existing job %d", key, again, res.Job.ID)
		}

		// Alone, another request (fingerprint): the deleted job no longer
		// decides either.
		key = end + "-other"
		old = deletedKey(t, s, key, done)
		res = insertAll(t, s, now, keyed("k-"+key, key, "fp2"))[0]
		if res.Err != nil || res.Existing || res.Job == nil || res.Job.ID == old.ID {
			t.Fatalf("%s: insert of another request after its job %d was deleted: %+v", key, old.ID, res)
		}
		wantDeletedKeyRecord(t, s, key, old, done, res.Job.ID, "fp2", now)

		// In batches: a small one with new keys, a keyless job and a
		// repeat of the key, and one of 70 items (a backend's bulk path).
		for _, size := range []int{4, 70} {
			key = fmt.Sprintf("%s-batch%d", end, size)
			old = deletedKey(t, s, key, done)
			ps := []*store.JobInsertParams{keyed("k-"+key, key, "fp"), newJob("plain")}
			for i := len(ps); len(ps) < size-1; i++ {
				ps = append(ps, keyed("fresh", fmt.Sprintf("%s-fresh-%02d", key, i), "fp"))
			}
			ps = append(ps, keyed("k-"+key, key, "fp"))
			out := insertAll(t, s, now, ps...)
			for i, r := range out {
				if r.Err != nil || r.Job == nil {
					t.Fatalf("%s: batch item %d: %+v", key, i, r)
				}
				if i < len(out)-1 && r.Existing {
					t.Errorf("%s: batch item %d: Existing, want a new job", key, i)
				}
			}
			first, last := out[0], out[len(out)-1]
			if first.Job.ID == old.ID {
				t.Fatalf("%s: the batch answered with the deleted job %d", key, old.ID)
			}
			if !last.Existing || last.Job.ID != first.Job.ID {
				t.Errorf("%s: the repeat in the batch: job %d existing %v, want existing %d", key, last.Job.ID, last.Existing, first.Job.ID)
			}
			wantDeletedKeyRecord(t, s, key, old, done, first.Job.ID, "fp", now)
		}
	}
}

// testRaceKeyOfDeletedJob: the keys of deleted jobs (one dead, one
// completed, each deleted in its open window) are enqueued again by 16
// goroutines at once — alone, both in one request in either order, or in
// requests of 70 items (a backend's bulk path). Each key gets exactly one
// new job, every insert of it is answered with that job, and the record
// names it (keeping the completed job's result). Overlap: parallel's start
// barrier releases the 16 goroutines together, each sending its request
// once; five rounds, each on its own pair of keys.
func testRaceKeyOfDeletedJob(t *testing.T, s store.Store) {
	const n, rounds, big = 16, 5, 70
	for round := range rounds {
		now := at(2*time.Minute + time.Duration(round)*time.Second)
		dead, done := fmt.Sprintf("DEAD-%d", round), fmt.Sprintf("DONE-%d", round)
		oldDead, oldDone := deletedKey(t, s, dead, false), deletedKey(t, s, done, true)
		var answers keyAnswers
		fresh := 0
		reqs := make([][]*store.JobInsertParams, n)
		for g := range reqs {
			a, b := keyed("k-"+dead, dead, "fp"), keyed("k-"+done, done, "fp")
			switch g % 4 {
			case 0:
				reqs[g] = []*store.JobInsertParams{a, b}
			case 1:
				reqs[g] = []*store.JobInsertParams{b, a}
			case 2:
				reqs[g] = []*store.JobInsertParams{[]*store.JobInsertParams{a, b}[g/4%2]}
			default:
				ps := []*store.JobInsertParams{b}
				for i := range big - 2 {
					ps = append(ps, keyed("fresh", fmt.Sprintf("r%d-g%d-%02d", round, g, i), "fp"))
				}
				reqs[g] = append(ps, a)
				fresh += big - 2
			}
		}
		err := parallel(n, func(g int) error {
			res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: reqs[g], Now: now})
			if err != nil {
				return err
			}
			return answers.add(reqs[g], res)
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if answers.created != 2+fresh {
			t.Errorf("round %d: %d inserts created a job, want %d (one per key)", round, answers.created, 2+fresh)
		}
		for key, old := range map[string]*idemtype.JobRow{dead: oldDead, done: oldDone} {
			got := answers.jobs[key]
			if len(got) != 1 || got[old.ID] {
				t.Fatalf("round %d: %s answered with jobs %v, want one new job (the deleted one was %d)", round, key, got, old.ID)
			}
			for id := range got {
				wantDeletedKeyRecord(t, s, key, old, key == done, id, "fp", now)
			}
		}
	}
}
