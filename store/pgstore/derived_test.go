package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestKeyedCompletionWritesOneRecordRow: a keyed job's record is written
// once over the job's life — at its insert — when its completion can be
// read from the job row (derivedJoin): the record row's version (xmin)
// after the completion is the insert's, and the record reads completed
// with the job's result. A completion whose record cannot be derived (a
// compressed result, a window of 0) writes the record, as before; so does
// JobDelete of a job whose completion the record derives, after which the
// record reads exactly as before. The conformance suite checks what every
// reader sees (storetest's completion_reads_alike_everywhere…).
func TestKeyedCompletionWritesOneRecordRow(t *testing.T) {
	s := newTestStore(t, 4)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	keys := []string{"derived", "compressed", "window0"}
	var ps []*store.JobInsertParams
	for _, k := range keys {
		p := benchJob()
		p.Queue, p.RunAt, p.IdempotencyKey, p.Fingerprint = "dq", now, k, "fp"
		p.DedupWindow, p.ResultTTL = 7*24*time.Hour, 7*24*time.Hour // the client's defaults
		if k == "window0" {
			p.DedupWindow = 0
		}
		ps = append(ps, p)
	}
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	xmin := func(key string) uint32 {
		t.Helper()
		var x uint32
		if err := s.pool.QueryRow(ctx, s.sql(`SELECT xmin::text::bigint FROM {schema}.records WHERE tenant = 'default' AND key = $1`),
			key).Scan(&x); err != nil {
			t.Fatalf("xmin of %s: %v", key, err)
		}
		return x
	}
	inserted := map[string]uint32{}
	for _, k := range keys {
		inserted[k] = xmin(k)
	}
	jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"dq"}, WorkerID: "w", Limit: 3,
		LeaseUntil: now.Add(time.Minute), Now: now})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	result := `{"answer": 42}`
	sum := sha256.Sum256([]byte(result))
	fin := now.Add(time.Second)
	var fins []*store.JobFinishParams
	for _, j := range jobs {
		f := &store.JobFinishParams{ID: j.ID, LeaseToken: j.LeaseToken, State: idemtype.StateCompleted,
			Outcome: idemtype.OutcomeCompleted, Result: json.RawMessage(result), FinishedAt: fin, DurationMS: 3,
			RecordResult: []byte(result), ResultHash: hex.EncodeToString(sum[:])}
		if j.IdempotencyKey == "compressed" {
			f.RecordResult, f.RecordCompressed = []byte{0x1f, 0x8b, 1, 2}, true
		}
		fins = append(fins, f)
	}
	if errs, err := s.JobFinishMany(ctx, fins); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("finish: %v %v", errs, err)
	}
	for _, k := range keys {
		if written := xmin(k) != inserted[k]; written != (k != "derived") {
			t.Errorf("record %s written by its completion: %v", k, written)
		}
	}
	get := func() *idemtype.Record {
		t.Helper()
		r, err := s.RecordGet(ctx, &store.RecordGetParams{Tenant: "default", Key: "derived", Now: fin})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	derived := get()
	if derived.Status != idemtype.RecordCompleted || string(derived.Result) != result || derived.ResultHash != fins[0].ResultHash ||
		derived.ResultJobID != res[0].Job.ID || derived.DurationMS != 3 || derived.CompletedAt == nil ||
		!derived.CompletedAt.Equal(fin) || derived.ExpiresAt == nil || !derived.ExpiresAt.Equal(fin.Add(7*24*time.Hour)) {
		t.Fatalf("derived record: %+v", derived)
	}
	if err := s.JobDelete(ctx, &store.JobDeleteParams{Tenant: "default", ID: res[0].Job.ID, State: idemtype.StateCompleted}); err != nil {
		t.Fatal(err)
	}
	if xmin("derived") == inserted["derived"] {
		t.Error("JobDelete did not write the completion into the record")
	}
	if got := get(); !reflect.DeepEqual(got, derived) {
		t.Errorf("record after JobDelete:\n got %+v\nwant %+v", got, derived)
	}
}
