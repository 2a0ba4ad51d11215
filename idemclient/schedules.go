package idemclient

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idem-dev/idem/idemhttp/wire"
)

// Schedule is a schedule with its last and next firings.
type Schedule = wire.Schedule

// ScheduleRequest defines a schedule: Cron or Every, and the job of each firing.
type ScheduleRequest = wire.ScheduleRequest

// PutSchedule creates or replaces the schedule name (its firing history is
// kept). Args the server would refuse by its JSON rule (see Complete) are
// refused before sending (ErrInvalid naming args). A nil req is sent as an
// empty one: the server names what is missing.
func (cl *Client) PutSchedule(ctx context.Context, name string, req *ScheduleRequest) (*Schedule, error) {
	if req == nil {
		req = &ScheduleRequest{} // not null, which the server refuses as such
	}
	if err := checkDocument("args", req.Args); err != nil {
		return nil, fmt.Errorf("idemclient: put schedule %q: %w", name, err)
	}
	var out Schedule
	_, err := cl.do(ctx, &call{method: http.MethodPut, path: schedulePath(name, ""), body: req, out: &out})
	return nilIfErr(&out, err)
}

// GetSchedule returns the schedule name.
func (cl *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	var out Schedule
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: schedulePath(name, ""), out: &out})
	return nilIfErr(&out, err)
}

// ListSchedules returns the tenant's schedules, by name.
func (cl *Client) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	var out wire.ScheduleList
	_, err := cl.do(ctx, &call{method: http.MethodGet, path: "/v1/schedules", out: &out})
	return out.Schedules, err
}

// DeleteSchedule deletes the schedule name; the jobs it made are kept.
//
// A retry after a lost reply that finds it gone (404) reports success: the
// earlier attempt may have deleted it. So nil means "it is gone", and
// ErrNotFound is reported only when the first attempt answers 404.
func (cl *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := cl.do(ctx, &call{method: http.MethodDelete, path: schedulePath(name, "")})
	return err
}

// TriggerSchedule fires the schedule now. Triggers with the same non-empty
// key make one job; retries of one call never make two (Idempotency-Key).
func (cl *Client) TriggerSchedule(ctx context.Context, name, key string) (*EnqueueResult, error) {
	var out wire.EnqueueReply
	status, err := cl.do(ctx, &call{method: http.MethodPost, path: schedulePath(name, "/trigger"),
		body: &wire.TriggerRequest{Key: key}, out: &out})
	if err != nil {
		return nil, err
	}
	out.Existing = out.Existing || status == http.StatusOK
	return &EnqueueResult{EnqueueReply: out}, nil
}

func schedulePath(name, suffix string) string {
	return "/v1/schedules/" + pathSegment(name) + suffix
}
