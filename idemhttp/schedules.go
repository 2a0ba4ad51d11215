package idemhttp

import (
	"net/http"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/key"
)

// putSchedule handles PUT /v1/schedules/{name}: 200 and the schedule; bad
// input is a 400 naming the field, and nothing is stored.
func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	var req wire.ScheduleRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	sc := idem.Schedule{Name: name, Tenant: tenantOf(r), Cron: req.Cron, Timezone: req.Timezone,
		Grain: key.Grain(req.Grain), Missed: req.Missed, Queue: req.Queue, Kind: req.Kind,
		Args: rawOrNil(req.Args), Priority: req.Priority, MaxAttempts: req.MaxAttempts}
	every, err := parseDuration("every", req.Every)
	if err != nil {
		return err
	}
	if every != nil {
		sc.Every = *every
	}
	if sc.DedupWindow, err = parseDedupWindow(req.DedupWindow); err != nil {
		return err
	}
	if sc.ResultTTL, err = parseDuration("result_ttl", req.ResultTTL); err != nil {
		return err
	}
	timeout, err := parseDuration("timeout", req.Timeout)
	if err != nil {
		return err
	}
	if timeout != nil {
		sc.Timeout = *timeout
	}
	if req.Kind == "" {
		return invalid("kind", "must not be empty")
	}
	if req.MaxAttempts < 0 {
		return invalid("max_attempts", "must be between 1 and 1000")
	}
	if req.Retry != nil {
		pol, attempts, err := parseRetry(req.Retry)
		if err != nil {
			return err
		}
		if attempts > 0 {
			if req.MaxAttempts != 0 && req.MaxAttempts != attempts {
				return invalid("retry.max_attempts", "differs from max_attempts")
			}
			sc.MaxAttempts = attempts
		}
		sc.Retry = pol
	}
	info, err := s.client.SchedulePut(r.Context(), &sc)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderSchedule(info))
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	info, err := s.client.ScheduleGet(r.Context(), tenantOf(r), name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderSchedule(info))
	return nil
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	list, err := s.client.ScheduleList(r.Context(), tenantOf(r))
	if err != nil {
		return err
	}
	out := &wire.ScheduleList{Schedules: make([]*wire.Schedule, 0, len(list))}
	for _, info := range list {
		out.Schedules = append(out.Schedules, renderSchedule(info))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteSchedule handles DELETE /v1/schedules/{name}: 204; the jobs the
// schedule made are kept.
func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	if err := s.client.ScheduleDelete(r.Context(), tenantOf(r), name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// triggerSchedule handles POST /v1/schedules/{name}/trigger: a firing now,
// 201 {job, existing:false}; with a body key seen before, 200 existing:true.
func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request) error {
	name, err := pathName(r)
	if err != nil {
		return err
	}
	var req wire.TriggerRequest
	if err := s.decodeBody(r, &req, true); err != nil {
		return err
	}
	res, err := s.client.ScheduleTrigger(r.Context(), tenantOf(r), name, &idem.ScheduleTriggerOpts{Key: req.Key})
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
	}
	writeJSON(w, status, &wire.EnqueueReply{Job: renderJob(res.Job, false), Existing: res.Existing})
	return nil
}

// renderSchedule is the wire form of a schedule.
func renderSchedule(info *idem.ScheduleInfo) *wire.Schedule {
	out := &wire.Schedule{Name: info.Name, Tenant: info.Tenant, Cron: info.Cron, Timezone: info.Timezone,
		Grain: string(info.Grain), Missed: info.Missed, Queue: info.Queue, Kind: info.Kind,
		Args: info.Args, Priority: info.Priority, MaxAttempts: info.MaxAttempts,
		CreatedAt: info.CreatedAt, UpdatedAt: info.UpdatedAt, LastFiredAt: info.LastFiredAt,
		NextFireAt: info.NextFireAt, LastJobState: string(info.LastJobState)}
	if out.Timezone == "" {
		out.Timezone = "UTC"
	}
	if out.Grain == "" {
		out.Grain = string(key.GrainMinute)
	}
	if out.Queue == "" {
		out.Queue = idem.DefaultQueue
	}
	if len(out.Args) == 0 {
		out.Args = []byte("{}")
	}
	if info.Every != 0 {
		out.Every = info.Every.String()
	}
	if info.DedupWindow != nil {
		out.DedupWindow = info.DedupWindow.String()
		if *info.DedupWindow == idem.DedupForever {
			out.DedupWindow = idem.DedupForeverName
		}
	}
	if info.ResultTTL != nil {
		out.ResultTTL = info.ResultTTL.String()
	}
	if info.Timeout != 0 {
		out.Timeout = info.Timeout.String()
	}
	if info.LastJobID != 0 {
		out.LastJobID = formatID(info.LastJobID)
	}
	if info.Retry != nil {
		out.Retry = retrySpec(info.Retry)
	}
	return out
}
