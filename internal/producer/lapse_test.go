package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/producer"
	"github.com/idem-dev/idem/store"
)

// downStore is the real store whose heartbeats fail while down is set (a
// database this process cannot reach).
type downStore struct {
	store.Store
	down bool
}

func (s *downStore) JobHeartbeatMany(ctx context.Context, p *store.JobHeartbeatParams) ([]error, error) {
	if s.down {
		return nil, errors.New("connection refused")
	}
	return s.Store.JobHeartbeatMany(ctx, p)
}

// TestLeaseLapsedWhileHeartbeatsFailCancelsTheHandler: while renewals
// fail, a handler runs on as long as its lease, as last renewed, has not
// ended; once it has, the rescuer may run the job elsewhere, so the
// handler is cancelled with ErrLeaseLost and its finish dropped — it
// used to run on until a renewal reached the store again.
func TestLeaseLapsedWhileHeartbeatsFailCancelsTheHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	started := make(chan *idemtype.JobRow, 1)
	cause := make(chan error, 1)
	release := make(chan struct{})
	b.handle("k", func(ctx context.Context, row *idemtype.JobRow) (json.RawMessage, error) {
		started <- row
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-release:
			cause <- nil
		}
		return nil, nil
	})
	b.insert(t, 1, "k")
	p := b.producer(t, 1)
	_ = p.Start(ctx)
	row := <-started
	if row.LeaseExpiresAt == nil {
		t.Fatal("claimed row without its lease's end")
	}
	const lease = time.Minute
	now := *row.LeaseExpiresAt
	st := &downStore{Store: b.store}
	h := producer.NewHeartbeater(st, b.running, &producer.HeartbeaterConfig{LeaseDuration: lease,
		Now: func() time.Time { return now }})

	// A renewal that reaches the store moves the known end to now + lease.
	now = now.Add(-lease / 2)
	h.RunOnce(ctx)
	st.down = true
	// Failing renewals before that end: the handler runs on.
	now = now.Add(lease - time.Second)
	h.RunOnce(ctx)
	select {
	case err := <-cause:
		t.Fatalf("handler ended (%v) while its renewed lease had a second left", err)
	default:
	}
	if l := b.running.Leases(); len(l) != 1 {
		t.Fatalf("running leases %v, want the job's", l)
	}
	// At the renewed end, still failing: cancelled as lost.
	now = now.Add(time.Second)
	h.RunOnce(ctx)
	select {
	case err := <-cause:
		if !errors.Is(err, idemtype.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the handler of a job whose lease ended while heartbeats failed was not cancelled")
	}
	if l := b.running.Leases(); len(l) != 0 {
		t.Fatalf("leases still renewed after the lapse: %v", l)
	}
	b.running.Wait()
}
