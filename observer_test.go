package idem_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// TestObserverSeesDo: Do reports its cache miss and then its hit.
func TestObserverSeesDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	obs := &countingObserver{counts: map[idem.EventType]int{}}
	client, err := idem.NewClient(st, &idem.Config{DisableMaintenance: true, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := client.Do(ctx, "report-1", func(context.Context) (any, error) { return 1, nil }, nil); err != nil {
			t.Fatal(err)
		}
	}
	if obs.counts[idem.EventCacheMiss] != 1 || obs.counts[idem.EventCacheHit] != 1 {
		t.Fatalf("events %v", obs.counts)
	}
}

// rescueObserver signals every rescued job.
type rescueObserver struct{ rescued chan *idem.JobEvent }

func (o *rescueObserver) ObserveJob(e *idem.JobEvent) {
	if e.Type == idem.EventRescued {
		o.rescued <- e
	}
}

// TestObserverSeesRescue: a job whose lease expires is reported rescued,
// with its queue and kind, by the maintenance leader.
func TestObserverSeesRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "idem.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	obs := &rescueObserver{rescued: make(chan *idem.JobEvent, 4)}
	client, err := idem.NewClient(st, &idem.Config{Now: now, Observer: obs, RescueInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, SendArgs{To: "ada@example.com"}, &idem.EnqueueOpts{Queue: "mail"}); err != nil {
		t.Fatal(err)
	}
	if jobs, err := client.Claim(ctx, idem.ClaimParams{Queues: []string{"mail"}, WorkerID: "w", Lease: time.Second}); err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d %v", len(jobs), err)
	}
	offset.Store(int64(time.Minute)) // the lease is long expired
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		client.Stop(sctx)
	}()
	select {
	case e := <-obs.rescued:
		if e.Queue != "mail" || e.Kind != (SendArgs{}).Kind() || e.JobID == 0 {
			t.Fatalf("rescued event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no rescued event")
	}
}
