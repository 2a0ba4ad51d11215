package store

import (
	"fmt"
	"strings"

	"github.com/idem-dev/idem/idemtype"
)

// RetryRefusal is a job JobRetryMany will not retry: it never started
// (Attempt 0 and no attempt stored), it waits for its dependencies to
// complete (not DependsOnFinished), and its dependency Dependency no
// longer exists. A deleted dependency may have completed (retention) or
// not (a dead job deleted from the DLQ); the store cannot tell which, and
// the job never ran, so retrying it could run it although its dependency
// never completed. It wraps idemtype.ErrInvalid, as an insert naming a
// missing dependency is refused.
type RetryRefusal struct {
	ID         int64 // the job refused
	Dependency int64 // its smallest dependency that no longer exists
}

// Error implements error.
func (r *RetryRefusal) Error() string {
	return fmt.Sprintf("job %d: dependency %d no longer exists; it did not complete before this job could run: "+
		"enqueue the job again without it", r.ID, r.Dependency)
}

// Unwrap makes a refusal match idemtype.ErrInvalid.
func (r *RetryRefusal) Unwrap() error { return idemtype.ErrInvalid }

// RetryRefusedError is the error of JobRetryMany by IDs when some of the
// selected jobs are refused (RetryRefusal): no job is moved and every
// refused job is listed, in id order. It matches idemtype.ErrInvalid.
type RetryRefusedError struct {
	Refused []*RetryRefusal
}

// maxRefusalsShown bounds the refusals a RetryRefusedError message lists.
const maxRefusalsShown = 10

// Error implements error.
func (e *RetryRefusedError) Error() string {
	var b strings.Builder
	for i, r := range e.Refused {
		if i == maxRefusalsShown {
			fmt.Fprintf(&b, " (and %d more jobs refused)", len(e.Refused)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.Error())
	}
	if len(e.Refused) > 0 {
		b.WriteString("; nothing was retried")
	}
	return b.String()
}

// Unwrap makes the error match idemtype.ErrInvalid and each refusal.
func (e *RetryRefusedError) Unwrap() []error {
	out := []error{idemtype.ErrInvalid}
	for _, r := range e.Refused {
		out = append(out, r)
	}
	return out
}
