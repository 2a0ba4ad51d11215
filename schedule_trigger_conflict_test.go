package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/store"
)

// replaceOnRead is a real store whose every ScheduleGet is followed by a
// put of the schedule with new args by another client: a schedule replaced
// again and again while it is being triggered.
type replaceOnRead struct {
	store.Store
	other *idem.Client
	n     atomic.Int64
	calm  atomic.Bool // no more replacing
	t     *testing.T
}

func (s *replaceOnRead) ScheduleGet(ctx context.Context, p *store.ScheduleGetParams) (*store.Schedule, error) {
	sc, err := s.Store.ScheduleGet(ctx, p)
	if err == nil && !s.calm.Load() {
		v := s.n.Add(1)
		if _, perr := s.other.SchedulePut(ctx, &idem.Schedule{Name: p.Name, Every: 10 * time.Minute, Kind: "tick",
			Args: fmt.Appendf(nil, `{"v":%d}`, v)}); perr != nil {
			s.t.Error(perr)
		}
	}
	return sc, err
}

// TestScheduleTriggerContendedIsConflict: a trigger whose schedule is
// replaced after each of its reads gives up as a retryable conflict
// (ErrConflict; over HTTP 409 problem+json with Retry-After), not an
// unclassified error (a 500), and makes no job. The 409 is not stored
// under the request's Idempotency-Key: its repeat with the key, once the
// schedule is left alone, fires (it got the 409 replayed).
func TestScheduleTriggerContendedIsConflict(t *testing.T) {
	t.Parallel()
	for _, sk := range storeKinds() {
		t.Run(sk.name, func(t *testing.T) {
			t.Parallel()
			raw, _ := sk.open(t)
			clock := &fakeClock{now: schedDay}
			other := schedClient(t, raw, clock)
			st := &replaceOnRead{Store: raw, other: other, t: t}
			c := schedClient(t, st, clock)
			ctx := t.Context()
			putSchedule(t, other, idem.Schedule{Name: "tick", Every: 10 * time.Minute, Kind: "tick", Args: []byte(`{"v":0}`)})

			if res, err := c.ScheduleTrigger(ctx, "", "tick", nil); !errors.Is(err, idem.ErrConflict) {
				t.Errorf("trigger of a schedule replaced after each read: %+v, %v; want ErrConflict", res, err)
			}

			api, err := idemhttp.NewServer(c, st, &idemhttp.Config{Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			secret, key := idemhttp.NewAPIKey("default", true, "t", time.Now())
			if err := raw.APIKeyCreate(ctx, key); err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(api)
			defer hs.Close()
			trigger := func() *http.Response {
				t.Helper()
				req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/schedules/tick/trigger", strings.NewReader(`{}`))
				req.Header.Set("Authorization", "Bearer "+secret)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "trigger-1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			resp := trigger()
			defer resp.Body.Close()
			var p struct{ Type, Detail string }
			_ = json.NewDecoder(resp.Body).Decode(&p)
			if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" ||
				resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(p.Detail, "tick") {
				t.Fatalf("HTTP trigger: %d %q Retry-After %q %+v; want 409 problem+json with Retry-After naming the schedule",
					resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), p)
			}
			jobs, _, err := c.JobList(ctx, &idem.JobListParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 0 {
				t.Fatalf("jobs made by contended triggers: %d", len(jobs))
			}
			st.calm.Store(true)
			again := trigger()
			defer again.Body.Close()
			if again.StatusCode != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("trigger repeated with the key of its 409, the schedule left alone: %d (Idempotent-Replayed %q), want 201 run again",
					again.StatusCode, again.Header.Get("Idempotent-Replayed"))
			}
		})
	}
}
