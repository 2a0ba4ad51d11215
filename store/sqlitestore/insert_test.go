package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// TestInsertSharedRows: a batch whose jobs differ only in their args binds
// the other columns once (insertSharedRows); every stored row equals the
// one the same job gets when inserted alone. In a batch whose jobs differ
// in any other column, each row keeps its own value.
func TestInsertSharedRows(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	base := func(i int) *store.JobInsertParams {
		return &store.JobInsertParams{Tenant: "acme", Queue: "q", Kind: "k",
			Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Priority: 3, MaxAttempts: 7,
			RunAt: t0.Add(time.Hour), PartitionKey: "p", Metadata: json.RawMessage(`{"m":1}`),
			RetryPolicy: json.RawMessage(`{"base_ms":5}`), Timeout: 1500 * time.Millisecond}
	}
	variants := []func(p *store.JobInsertParams){
		nil, // the shared batch
		func(p *store.JobInsertParams) { p.Metadata = nil },
		func(p *store.JobInsertParams) { p.Metadata = json.RawMessage{} },
		func(p *store.JobInsertParams) { p.RetryPolicy = nil },
		func(p *store.JobInsertParams) { p.Timeout = 0 },
		func(p *store.JobInsertParams) { p.RunAt = time.Time{} }, // available now
		func(p *store.JobInsertParams) { p.RunAt = t0.Add(2 * time.Hour) },
		func(p *store.JobInsertParams) { p.Priority = -1 },
		func(p *store.JobInsertParams) { p.PartitionKey = "" },
		func(p *store.JobInsertParams) { p.Kind = "other" },
		func(p *store.JobInsertParams) { p.Queue = "q2" },
		func(p *store.JobInsertParams) { p.MaxAttempts = 1 },
	}
	batches := map[string][]*store.JobInsertParams{}
	for i := range 5 {
		batches["shared"] = append(batches["shared"], base(i))
	}
	// One batch per column: two jobs that differ in that column alone.
	for i, v := range variants[1:] {
		p := base(100 + i)
		v(p)
		batches[fmt.Sprintf("variant %d", i+1)] = []*store.JobInsertParams{base(200 + i), p}
	}
	// NULL and an empty blob are stored apart.
	for i, blob := range []func(p *store.JobInsertParams, b json.RawMessage){
		func(p *store.JobInsertParams, b json.RawMessage) { p.Metadata = b },
		func(p *store.JobInsertParams, b json.RawMessage) { p.RetryPolicy = b },
	} {
		a, b := base(300+i), base(400+i)
		blob(a, nil)
		blob(b, json.RawMessage{})
		batches[fmt.Sprintf("nil and empty %d", i)] = []*store.JobInsertParams{a, b}
	}
	for name, batch := range batches {
		got := insert(t, s, t0, batch...)
		for i, p := range batch {
			alone := insert(t, s, t0, p)[0].Job
			stored, want := getJob(t, s, got[i].Job.ID), getJob(t, s, alone.ID)
			stored.ID, want.ID = 0, 0
			if a, b := blobTypes(t, s, got[i].Job.ID), blobTypes(t, s, alone.ID); a != b {
				t.Errorf("%s, job %d: blob types %s, want (inserted alone) %s", name, i, a, b)
			}
			if !reflect.DeepEqual(stored, want) {
				t.Errorf("%s, job %d: stored\n%+v\nwant (inserted alone)\n%+v", name, i, stored, want)
			}
		}
	}
	shared := batches["shared"]
	if j := getJob(t, s, insert(t, s, t0, shared[:2]...)[1].Job.ID); j.State != idemtype.StateScheduled ||
		string(j.Args) != `{"i":1}` || string(j.Metadata) != `{"m":1}` || j.Timeout != 1500*time.Millisecond {
		t.Errorf("shared row: %+v", j)
	}
}

// blobTypes is the storage class of a job's metadata and retry policy
// (JobGet reads NULL and an empty blob alike).
func blobTypes(t *testing.T, s *Store, id int64) string {
	t.Helper()
	var types string
	err := s.rdb.QueryRowContext(context.Background(),
		`SELECT typeof(metadata) || ',' || typeof(retry_policy) FROM jobs WHERE id = ?`, id).Scan(&types)
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// TestRepeatedKeyRead: a repeated key inside its dedup window is answered
// by one read, without the writer: the job as stored, or KeyReusedError for
// another fingerprint. A closed window, another tenant or an unknown key
// go to the writer, which decides.
func TestRepeatedKeyRead(t *testing.T) {
	t.Parallel()
	s := openTest(t, nil)
	first := insert(t, s, t0, keyedJob("k", "key", "fp"))[0].Job
	writes := func() int64 { return s.w.opsRun.Load() }

	before := writes()
	res := insert(t, s, t0.Add(time.Minute), keyedJob("k", "key", "fp"))[0]
	if !res.Existing || res.Err != nil || !reflect.DeepEqual(res.Job, getJob(t, s, first.ID)) {
		t.Errorf("repeat: %+v, want the first job %+v", res, first)
	}
	reused := insert(t, s, t0.Add(time.Minute), keyedJob("k", "key", "other"))[0]
	var kr *idemtype.KeyReusedError
	if !errors.As(reused.Err, &kr) || kr.JobID != first.ID || kr.Key != "key" {
		t.Errorf("other fingerprint: %+v", reused)
	}
	if got := writes(); got != before {
		t.Errorf("the repeats took the writer (%d ops)", got-before)
	}

	other := keyedJob("k", "key", "fp")
	other.Tenant = "acme"
	if res := insert(t, s, t0.Add(time.Minute), other)[0]; res.Existing || res.Err != nil || res.Job.Tenant != "acme" {
		t.Errorf("other tenant: %+v", res)
	}
	before = writes()
	late := insert(t, s, t0.Add(2*time.Hour), keyedJob("k", "key", "fp"))[0] // the one-hour window closed
	if late.Existing || late.Err != nil || late.Job.ID == first.ID {
		t.Errorf("after the window: %+v", late)
	}
	if writes() == before {
		t.Error("a closed window was answered without the writer")
	}

	// A finished job's record outlives its window (the result TTL): still
	// a new job once the window closed.
	done := insert(t, s, t0, keyedJob("k", "done", "fp"))[0].Job
	for _, j := range claim(t, s, t0, 10) {
		finish(t, s, j, idemtype.StateCompleted, t0.Add(time.Second))
	}
	if rec, err := s.RecordGet(context.Background(), &store.RecordGetParams{Tenant: "default", Key: "done",
		Now: t0.Add(2 * time.Hour)}); err != nil || rec.JobID != done.ID {
		t.Fatalf("record after the window: %v %+v", err, rec)
	}
	if res := insert(t, s, t0.Add(2*time.Hour), keyedJob("k", "done", "fp"))[0]; res.Existing || res.Err != nil || res.Job.ID == done.ID {
		t.Errorf("finished, after the window: %+v", res)
	}
}
