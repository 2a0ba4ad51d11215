package idemclient

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/idem-dev/idem/internal/jsonrule"
)

// checkDocument applies the server's rule for the JSON documents it stores
// (internal/jsonrule, as idem.ValidateJSON: strict JSON, no repeated
// member name, numbers within the double range, at most idem.MaxJSONDepth
// deep and idem.MaxArgsBytes long) to doc before it is sent. A refusal is
// an *idemtype.InvalidError naming field (errors.Is ErrInvalid), the
// error the server would answer; an empty doc (none) passes.
func checkDocument(field string, doc json.RawMessage) error {
	if len(doc) == 0 {
		return nil
	}
	return jsonrule.Validate(field, doc)
}

// checkDocuments applies checkDocument to the args and metadata of a job
// to enqueue, their fields named after prefix ("jobs[2]." in a batch).
func (r *EnqueueRequest) checkDocuments(prefix string) error {
	if r == nil {
		return nil
	}
	if err := checkDocument(prefix+"args", r.Args); err != nil {
		return err
	}
	return checkDocument(prefix+"metadata", r.Metadata)
}

// checkBatch applies checkDocument to the documents of a batch's jobs and
// of its completion job.
func (r *BatchCreateRequest) checkBatch() error {
	for i, j := range r.Jobs {
		if err := j.checkDocuments(fmt.Sprintf("jobs[%d].", i)); err != nil {
			return err
		}
	}
	return r.OnFinish.checkDocuments("on_finish.")
}

// nonNilJobs returns jobs with every nil item an empty request, so that
// none is sent as JSON null (which the server refuses as such, naming no
// field): the server names what the empty one is missing. jobs itself is
// not changed.
func nonNilJobs(jobs []*EnqueueRequest) []*EnqueueRequest {
	if !slices.Contains(jobs, nil) {
		return jobs
	}
	out := make([]*EnqueueRequest, len(jobs))
	for i, j := range jobs {
		if j == nil {
			j = &EnqueueRequest{}
		}
		out[i] = j
	}
	return out
}
