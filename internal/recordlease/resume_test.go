package recordlease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/dbtest"
)

func TestResumeSQLite(t *testing.T) {
	t.Parallel()
	testResume(t, openSQLite)
}

func TestResumePostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	testResume(t, openPostgres)
}

// testResume: a lease taken in one request is resumed in another (the
// result-cache lease API): renewals move its end, only its owner may
// renew, complete or release it, and the tenant scopes the key.
func testResume(t *testing.T, open opener) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

	t.Run("renew, complete and release belong to the owner", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		clock := &fakeClock{t: t0}
		l, rec, err := Acquire(ctx, st, params("owner-1", clock))
		if err != nil || l == nil || rec != nil {
			t.Fatalf("acquire: %v %+v %v", l, rec, err)
		}
		if !l.Until().Equal(t0.Add(time.Minute)) || l.Tenant() != "default" {
			t.Fatalf("until %v tenant %q", l.Until(), l.Tenant())
		}

		// Another request of the same owner resumes it and renews it.
		clock.Add(40 * time.Second)
		r := Resume(st, params("owner-1", clock))
		until, err := r.Renew(ctx)
		if err != nil || !until.Equal(t0.Add(100*time.Second)) || !r.Until().Equal(until) {
			t.Fatalf("renew: %v %v", until, err)
		}
		// Someone else cannot renew, complete or release it.
		other := Resume(st, params("intruder", clock))
		if _, err := other.Renew(ctx); !errors.Is(err, ErrLost) || !errors.Is(err, idemtype.ErrLeaseLost) {
			t.Fatalf("intruder renew: %v", err)
		}
		if err := other.Complete(ctx, &Result{Bytes: []byte(`"forged"`), Hash: "h"}); !errors.Is(err, idemtype.ErrLeaseLost) {
			t.Fatalf("intruder complete: %v", err)
		}
		_ = other.Release(ctx) // a release by another owner changes nothing
		if l2, rec, err := Acquire(ctx, st, params("third", clock)); err != nil || l2 != nil || rec.LeaseOwner != "owner-1" {
			t.Fatalf("after the intruder's release the key is free: %v %+v %v", l2, rec, err)
		}

		// The owner completes from yet another request.
		done := Resume(st, params("owner-1", clock))
		if err := done.Complete(ctx, &Result{Bytes: []byte(`{"n":1}`), Hash: "h1", Duration: 1500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		_, rec, err = Acquire(ctx, st, params("late", clock))
		if err != nil || rec == nil || rec.Status != idemtype.RecordCompleted || string(rec.Result) != `{"n":1}` || rec.DurationMS != 1500 {
			t.Fatalf("after complete: %+v %v", rec, err)
		}
	})

	t.Run("a renewal after the lease lapsed and was taken over is lost", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		clock := &fakeClock{t: t0}
		if l, _, err := Acquire(ctx, st, params("slow", clock)); err != nil || l == nil {
			t.Fatal(err)
		}
		clock.Add(2 * time.Minute)
		if l, _, err := Acquire(ctx, st, params("fast", clock)); err != nil || l == nil {
			t.Fatalf("take over a lapsed lease: %v", err)
		}
		if _, err := Resume(st, params("slow", clock)).Renew(ctx); !errors.Is(err, ErrLost) {
			t.Fatalf("renew of a lease taken over: %v", err)
		}
	})

	t.Run("the tenant scopes the key", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		clock := &fakeClock{t: t0}
		a := params("owner-a", clock)
		b := params("owner-b", clock)
		b.Tenant = "other"
		la, _, err := Acquire(ctx, st, a)
		if err != nil || la == nil {
			t.Fatal(err)
		}
		lb, rec, err := Acquire(ctx, st, b)
		if err != nil || lb == nil || rec != nil || lb.Tenant() != "other" {
			t.Fatalf("the same key in another tenant is held: %v %+v %v", lb, rec, err)
		}
	})

	t.Run("a lease must be positive", func(t *testing.T) {
		t.Parallel()
		st := open(t)
		p := params("x", &fakeClock{t: t0})
		p.Lease = 0
		if _, _, err := Acquire(ctx, st, p); err == nil {
			t.Fatal("acquired with a zero lease")
		}
	})
}
