package wire

// LimitRequest is the body of PUT /v1/limits/{scope}/{name}: a rate
// ("100/1m": 100 jobs started per minute), a concurrency (most running at
// once), or both.
type LimitRequest struct {
	Rate        *string `json:"rate,omitempty"`
	Concurrency *int    `json:"concurrency,omitempty"`
	// Weight is a tenant's share of claims relative to other tenants
	// (default 1); only for scope tenant.
	Weight *int `json:"weight,omitempty"`
}

// Limit is a limit with its current usage.
type Limit struct {
	Tenant      string `json:"tenant,omitempty"` // absent: every tenant (a queue limit)
	Queue       string `json:"queue,omitempty"`  // absent: every queue (a tenant limit)
	Rate        string `json:"rate,omitempty"`
	Concurrency int    `json:"concurrency,omitempty"`
	Weight      int    `json:"weight,omitempty"`
	Usage       Usage  `json:"usage"`
}

// Usage is how much of a limit is in use now.
type Usage struct {
	Running     int64  `json:"running"`                // jobs of the scope running
	WindowStart string `json:"window_start,omitempty"` // RFC 3339; the current rate window (absent without a rate)
	WindowUsed  int64  `json:"window_used"`            // jobs started in that window
	Throttled   int64  `json:"throttled"`              // claims that left work behind because of this limit
}

// LimitList is the reply of GET /v1/limits.
type LimitList struct {
	Limits []Limit `json:"limits"`
}

// PauseRequest is the optional body of POST /v1/queues/{queue}/pause and
// /resume: an admin key may name one tenant; a tenant key always acts on
// its own tenant's work.
type PauseRequest struct {
	Tenant string `json:"tenant,omitempty"`
}

// PauseReply answers pause and resume.
type PauseReply struct {
	Queue  string `json:"queue"`
	Tenant string `json:"tenant,omitempty"` // absent: the whole queue
	Paused bool   `json:"paused"`
}

// PausedScope is one paused queue (or one tenant's work in it).
type PausedScope struct {
	Queue  string `json:"queue"`
	Tenant string `json:"tenant,omitempty"`
}
