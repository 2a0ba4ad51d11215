package wire

import (
	"encoding/json"
	"time"
)

// BatchCreateRequest is the body of POST /v1/batches; the key may come as
// the Idempotency-Key header instead.
type BatchCreateRequest struct {
	Key      string           `json:"key,omitempty"`
	Metadata json.RawMessage  `json:"metadata,omitempty"`
	Jobs     []EnqueueRequest `json:"jobs"`
	// OnFinish is the batch's completion job: created with the batch, run
	// once every job has finished (completed, dead or cancelled). It takes
	// no idempotency_key and no depends_on; its metadata gets
	// "idem_batch_id".
	OnFinish *EnqueueRequest `json:"on_finish,omitempty"`
}

// Batch is a batch with its jobs (GET /v1/batches/{id}).
type Batch struct {
	ID        string           `json:"id"`
	Tenant    string           `json:"tenant"`
	Key       string           `json:"key"`
	CreatedAt time.Time        `json:"created_at"`
	Metadata  json.RawMessage  `json:"metadata,omitempty"`
	Counts    map[string]int64 `json:"counts"`
	Total     int              `json:"total"`
	Finished  bool             `json:"finished"`
	Jobs      []*Job           `json:"jobs"`
	// OnFinish is the batch's completion job (absent = none); not counted.
	OnFinish *Job `json:"on_finish,omitempty"`
}

// BatchCreateReply is the reply of POST /v1/batches.
type BatchCreateReply struct {
	Batch    *Batch `json:"batch"`
	Existing bool   `json:"existing"`
}
