package idem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/store"
)

// MaxResolutionNote is the longest note DLQResolve accepts, in bytes.
const MaxResolutionNote = 4096

// JobErrorCode gives a handler's failure an error code (seed 004's
// error_code): the job keeps the code of its latest failure (JobRow.ErrorCode),
// and the dead-letter queue can be listed and requeued by code. It composes
// with the other control errors: JobPermanent(JobErrorCode("BAD_INPUT", err))
// sends the job straight to dead with the code. A code is 1–255 printable
// ASCII characters without spaces; an empty code leaves err as it is.
func JobErrorCode(code string, err error) error {
	if code == "" {
		return err
	}
	if err == nil {
		err = errors.New("failed")
	}
	return &idemtype.CodedError{Code: code, Err: err}
}

// DLQResolve marks the dead job id resolved with note (seed 002's
// resolved_at, seed 004's is_resolved). The job stays dead and is kept for
// audit (JobRow.ResolvedAt, ResolutionNote); it leaves the unresolved count
// of the dead-letter queue (QueueStat.DeadUnresolved) and the
// Resolved=false filter. Resolving a resolved job returns it unchanged.
// A job that is not dead is ErrWrongState; an unknown one ErrNotFound.
func (c *Client) DLQResolve(ctx context.Context, tenant string, id int64, note string) (*JobRow, error) {
	if len(note) > MaxResolutionNote {
		return nil, idemtype.Invalid("note", "at most %d bytes", MaxResolutionNote)
	}
	if !utf8.ValidString(note) || strings.ContainsRune(note, 0) {
		return nil, idemtype.Invalid("note", "must be UTF-8 text without NUL")
	}
	row, err := c.store.JobResolve(ctx, &store.JobResolveParams{Tenant: c.tenant(tenant), ID: id, Note: note, Now: c.now()})
	if err != nil {
		return nil, fmt.Errorf("resolve dead job %d: %w", id, err)
	}
	c.cfg.Logger.Info("dead job resolved", "job", id, "tenant", row.Tenant, "error_code", row.ErrorCode)
	return row, nil
}
