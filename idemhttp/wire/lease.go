package wire

import (
	"encoding/json"
	"time"
)

// LeaseRequest is the (optional) body of POST /v1/idempotency/{key}/lease.
type LeaseRequest struct {
	Lease *string `json:"lease,omitempty"`      // default the server's lease duration
	TTL   *string `json:"result_ttl,omitempty"` // how long a completed result is kept
}

// LeaseReply is the reply of POST /v1/idempotency/{key}/lease: the cached
// result (acquired false, cached true), or a lease to run the work under.
type LeaseReply struct {
	Key            string          `json:"key"`
	Acquired       bool            `json:"acquired"`
	LeaseToken     string          `json:"lease_token,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	Cached         bool            `json:"cached"`
	Result         json.RawMessage `json:"result,omitempty"`
	OriginalJobID  string          `json:"original_job_id,omitempty"`
	StoredAt       *time.Time      `json:"stored_at,omitempty"`
	DurationMS     *int64          `json:"duration_ms,omitempty"`
}

// LeaseTokenRequest is the body of the lease's renew and release calls.
type LeaseTokenRequest struct {
	LeaseToken string  `json:"lease_token"`
	Lease      *string `json:"lease,omitempty"` // renew only; default: the acquire's lease, else the server's
}

// LeaseCompleteRequest is the body of POST /v1/idempotency/{key}/lease/complete.
type LeaseCompleteRequest struct {
	LeaseToken string          `json:"lease_token"`
	Result     json.RawMessage `json:"result,omitempty"`
	TTL        *string         `json:"result_ttl,omitempty"` // default: the acquire's result_ttl, else the server's
	DurationMS *int64          `json:"duration_ms,omitempty"`
}

// LeaseRenewReply is the reply of POST /v1/idempotency/{key}/lease/renew.
type LeaseRenewReply struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}
