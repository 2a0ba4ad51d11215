package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
	"github.com/idem-dev/idem/internal/leadership"
	"github.com/idem-dev/idem/internal/maintenance"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/pgstore"
)

// TestClockAheadOnPostgres: on PostgreSQL the database's clock decides
// expiry, so a rescuer and an elector whose clock runs one hour ahead
// neither rescue the live lease of a normal node nor take over its live
// leadership.
func TestClockAheadOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, schema := dbtest.NewSchema(t)
	st, err := pgstore.Open(ctx, url, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ahead := func() time.Time { return time.Now().Add(time.Hour) }

	insert(t, st, time.Now(), 1, "")
	jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, WorkerID: "normal", Limit: 1,
		LeaseUntil: time.Now().Add(time.Minute), Now: time.Now()})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v %v", jobs, err)
	}
	if n, err := maintenance.NewRescuer(st, &maintenance.Config{Now: ahead}).RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("the rescuer one hour ahead rescued %d (%v), want none", n, err)
	}
	row, err := st.JobGet(ctx, &store.JobGetParams{ID: jobs[0].ID})
	if err != nil || row.State != idemtype.StateRunning || row.LeaseToken != jobs[0].LeaseToken {
		t.Fatalf("live lease: %+v (%v), want running under its lease", row, err)
	}

	normal := leadership.New(st, leadership.Config{Owner: "normal", TTL: time.Minute})
	fast := leadership.New(st, leadership.Config{Owner: "fast", TTL: time.Minute, Now: ahead})
	if ok, err := normal.RunOnce(ctx); err != nil || !ok {
		t.Fatalf("normal node not elected: %v", err)
	}
	if ok, err := fast.RunOnce(ctx); err != nil || ok {
		t.Fatalf("the node one hour ahead took over a live leader (%v)", err)
	}
	if ok, err := normal.RunOnce(ctx); err != nil || !ok {
		t.Fatalf("normal node lost its term: %v", err)
	}
}
