package idemhttp

import (
	"bufio"
	"log/slog"
	"net/http"

	"github.com/idem-dev/idem"
)

// firstListChunk is how many jobs a list reads from the store first; later
// reads are sized by the bytes the page may still carry.
const (
	firstListChunk = 8
	maxListChunk   = 100
)

// writeList streams one page of jobs: it reads the store in chunks and
// writes each job as it is encoded, so a page of big jobs is never held
// whole in memory. A page ends early, with next_cursor, when the next job
// would take it past Config.MaxPageBytes (a page holds at least one job).
// A store error after the first chunk ends the page there, with next_cursor.
func (s *Server) writeList(w http.ResponseWriter, r *http.Request, p *idem.JobListParams) error {
	limit := p.Limit
	q := *p
	q.Limit = min(limit, firstListChunk)
	jobs, next, err := s.client.JobList(r.Context(), &q)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"jobs":[`)
	var written, size int
	var cursor int64
page:
	for {
		for _, j := range jobs {
			if written == limit {
				break page // more jobs follow: cursor is the last job written
			}
			b, err := marshalJSON(renderJob(j, false))
			if err != nil {
				// Stored bytes that do not encode (written before input was
				// validated): the job is left out of the page, not the page.
				s.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "list: job does not encode",
					slog.Int64("job_id", j.ID), slog.Any("err", err))
				cursor = j.ID
				continue
			}
			if written > 0 && size+len(b) > int(s.cfg.MaxPageBytes) {
				break page
			}
			if written > 0 {
				_ = bw.WriteByte(',')
			}
			_, _ = bw.Write(b)
			written, size, cursor = written+1, size+len(b), j.ID
		}
		if next == 0 {
			cursor = 0
			break
		}
		if written == limit {
			break
		}
		q.Cursor = next
		q.Limit = min(limit-written, chunkFor(size, written, int(s.cfg.MaxPageBytes)))
		if jobs, next, err = s.client.JobList(r.Context(), &q); err != nil {
			s.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "list page ended early", slog.Any("err", err))
			break
		}
	}
	_ = bw.WriteByte(']')
	if cursor != 0 {
		_, _ = bw.WriteString(`,"next_cursor":`)
		c, _ := marshalJSON(encodeCursor(cursor))
		_, _ = bw.Write(c)
	}
	_, _ = bw.WriteString("}\n")
	return bw.Flush()
}

// chunkFor sizes the next store read from the average size of the jobs so
// far and the bytes the page may still carry.
func chunkFor(size, written, budget int) int {
	if written == 0 || size == 0 {
		return firstListChunk
	}
	avg := max(1, size/written)
	return max(1, min(maxListChunk, (budget-size)/avg+1))
}
