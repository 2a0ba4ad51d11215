package wire

import (
	"encoding/json"
	"time"
)

// ScheduleRequest is the body of PUT /v1/schedules/{name}: cron or every,
// and the job of each firing.
type ScheduleRequest struct {
	Cron        string          `json:"cron,omitempty"`
	Every       *string         `json:"every,omitempty"` // Go duration, at least "1m"
	Timezone    string          `json:"timezone,omitempty"`
	Grain       string          `json:"grain,omitempty"`  // minute (default), hour or day
	Missed      string          `json:"missed,omitempty"` // skip (default) or catch_up
	Queue       string          `json:"queue,omitempty"`
	Kind        string          `json:"kind"`
	Args        json.RawMessage `json:"args,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	DedupWindow *string         `json:"dedup_window,omitempty"`
	ResultTTL   *string         `json:"result_ttl,omitempty"`
	Timeout     *string         `json:"timeout,omitempty"`
	// Retry is the retry policy of each firing's job (as for an enqueue);
	// absent = the queue's or kind's.
	Retry *RetrySpec `json:"retry,omitempty"`
}

// Schedule is a schedule as the API renders it, with its firings.
type Schedule struct {
	Name         string          `json:"name"`
	Tenant       string          `json:"tenant"`
	Cron         string          `json:"cron,omitempty"`
	Every        string          `json:"every,omitempty"`
	Timezone     string          `json:"timezone"`
	Grain        string          `json:"grain"`
	Missed       string          `json:"missed"`
	Queue        string          `json:"queue"`
	Kind         string          `json:"kind"`
	Args         json.RawMessage `json:"args"`
	Priority     int             `json:"priority"`
	MaxAttempts  int             `json:"max_attempts,omitempty"`
	DedupWindow  string          `json:"dedup_window,omitempty"`
	ResultTTL    string          `json:"result_ttl,omitempty"`
	Timeout      string          `json:"timeout,omitempty"`
	Retry        *RetrySpec      `json:"retry,omitempty"` // the firings' own retry policy
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	LastFiredAt  *time.Time      `json:"last_fired_at,omitempty"`
	NextFireAt   *time.Time      `json:"next_fire_at,omitempty"`
	LastJobID    string          `json:"last_job_id,omitempty"`
	LastJobState string          `json:"last_job_state,omitempty"`
}

// ScheduleList is the reply of GET /v1/schedules.
type ScheduleList struct {
	Schedules []*Schedule `json:"schedules"`
}

// TriggerRequest is the optional body of POST /v1/schedules/{name}/trigger.
type TriggerRequest struct {
	// Key makes repeated triggers one job; "" = a new firing each time.
	Key string `json:"key,omitempty"`
}
