package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/store"
)

// changeAfterRead is a real store that, once armed, runs a change right
// after its next ScheduleList or ScheduleGet has read the schedules: a
// delete or a put by another client landing while a scheduler pass (or a
// trigger) is under way.
type changeAfterRead struct {
	store.Store
	mu     sync.Mutex
	change func()
}

func (s *changeAfterRead) arm(change func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.change = change
}

func (s *changeAfterRead) afterRead() {
	s.mu.Lock()
	f := s.change
	s.change = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

func (s *changeAfterRead) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	list, err := s.Store.ScheduleList(ctx, p)
	s.afterRead()
	return list, err
}

func (s *changeAfterRead) ScheduleGet(ctx context.Context, p *store.ScheduleGetParams) (*store.Schedule, error) {
	sc, err := s.Store.ScheduleGet(ctx, p)
	s.afterRead()
	return sc, err
}

// TestScheduleChangedDuringPassDoesNotFire: a schedule deleted or replaced
// after the scheduler read it, before it fired, does not fire with the
// definition it read: a deleted one makes no job, a replaced one fires
// with its new definition on the next pass, and a skipped firing of a
// replaced one is not recorded. A trigger racing a delete is ErrNotFound,
// one racing a replace uses the new definition.
func TestScheduleChangedDuringPassDoesNotFire(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			raw, _ := sk.open(t)
			st := &changeAfterRead{Store: raw}
			clock := &fakeClock{now: schedDay}
			c := schedClient(t, st, clock)
			other := schedClient(t, raw, clock) // the client that changes the schedules
			ctx := t.Context()
			tick := idem.Schedule{Name: "tick", Every: 10 * time.Minute, Kind: "tick", Args: []byte(`{"v":1}`)}
			gone := idem.Schedule{Name: "gone", Every: 10 * time.Minute, Kind: "gone"}
			putSchedule(t, c, tick)
			putSchedule(t, c, gone)

			clock.Add(10 * time.Minute)
			v2 := tick
			v2.Args = []byte(`{"v":2}`)
			st.arm(func() {
				putSchedule(t, other, v2)
				if err := other.ScheduleDelete(ctx, "", "gone"); err != nil {
					t.Error(err)
				}
			})
			if n, err := idem.RunSchedulerOnce(c); err != nil || n != 0 {
				t.Errorf("pass during the changes: %d fired (%v), want 0", n, err)
			}
			compareKeys(t, firingKeys(t, c), map[string]int{})

			// The next pass fires the replaced schedule as it is now.
			if n, err := idem.RunSchedulerOnce(c); err != nil || n != 1 {
				t.Errorf("next pass: %d fired (%v), want 1", n, err)
			}
			wantJobArgs(t, c, idem.ScheduleKeyPrefix+"tick:default:2026-11-26T00:10", `{"v":2}`)

			// A skipped firing of a schedule replaced during the pass is not
			// recorded.
			clock.Add(3*time.Hour + 5*time.Minute) // 03:15: the 03:10 firing is past the grace
			v3 := tick
			v3.Args = []byte(`{"v":3}`)
			st.arm(func() { putSchedule(t, other, v3) })
			if n, err := idem.RunSchedulerOnce(c); err != nil || n != 0 {
				t.Errorf("late pass: %d fired (%v), want 0", n, err)
			}
			info, err := c.ScheduleGet(ctx, "", "tick")
			if err != nil {
				t.Fatal(err)
			}
			if info.LastFiredAt == nil || !info.LastFiredAt.Equal(schedDay.Add(10*time.Minute)) {
				t.Errorf("after a skip computed from the replaced definition: last fired %v, want 00:10", info.LastFiredAt)
			}

			// Triggers racing a replace and a delete.
			v4 := tick
			v4.Args = []byte(`{"v":4}`)
			st.arm(func() { putSchedule(t, other, v4) })
			res, err := c.ScheduleTrigger(ctx, "", "tick", nil)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Job.Args) != `{"v":4}` {
				t.Errorf("trigger racing a replace made args %s, want the new definition's", res.Job.Args)
			}
			st.arm(func() {
				if err := other.ScheduleDelete(ctx, "", "tick"); err != nil {
					t.Error(err)
				}
			})
			if _, err := c.ScheduleTrigger(ctx, "", "tick", nil); !errors.Is(err, idem.ErrNotFound) {
				t.Errorf("trigger racing a delete: %v, want ErrNotFound", err)
			}
			if keys := firingKeys(t, c); len(keys) != 2 {
				t.Errorf("jobs by key = %v, want the 00:10 firing and one trigger", keys)
			}
		})
	}
}

// wantJobArgs checks that the one job of key k has args.
func wantJobArgs(t *testing.T, c *idem.Client, k, args string) {
	t.Helper()
	jobs, _, err := c.JobListAll(t.Context(), &idem.JobListParams{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range jobs {
		if j.IdempotencyKey != k {
			continue
		}
		n++
		if string(j.Args) != args {
			t.Errorf("job %s: args %s, want %s", k, j.Args, args)
		}
	}
	if n != 1 {
		t.Errorf("%d jobs of key %s, want 1", n, k)
	}
}
