package idemhttp

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/internal/retryspec"
	"github.com/idem-dev/idem/key"
)

// enqueueParams validates one request and builds the client's params.
func (s *Server) enqueueParams(tenant string, req *wire.EnqueueRequest) (idem.EnqueueParams, error) {
	p, err := enqueueInput(tenant, req)
	if err != nil {
		return p, err
	}
	if err := s.client.ValidateEnqueue(p); err != nil {
		return p, err
	}
	return p, nil
}

// enqueueInput is enqueueParams without the client's validation of the
// params (names, keys, args, ranges: Client.ValidateEnqueue). POST
// /v1/jobs takes it: its one job goes to Client.EnqueueRaw, which runs
// that same validation first, before anything is written, and returns
// its error as ValidateEnqueue would (validating twice cost a new-key
// request a third parse of its args). Batches validate each item
// beforehand, since one bad item fails only itself.
func enqueueInput(tenant string, req *wire.EnqueueRequest) (idem.EnqueueParams, error) {
	runAt, err := parseTime("run_at", req.RunAt)
	if err != nil {
		return idem.EnqueueParams{}, err
	}
	dedup, err := parseDedupWindow(req.DedupWindow)
	if err != nil {
		return idem.EnqueueParams{}, err
	}
	ttl, err := parseDuration("result_ttl", req.ResultTTL)
	if err != nil {
		return idem.EnqueueParams{}, err
	}
	if ttl != nil && *ttl == 0 {
		return idem.EnqueueParams{}, invalid("result_ttl", "must be positive")
	}
	timeout, err := parseDuration("timeout", req.Timeout)
	if err != nil {
		return idem.EnqueueParams{}, err
	}
	deps, err := parseIDList("depends_on", req.DependsOn)
	if err != nil {
		return idem.EnqueueParams{}, err
	}
	if req.Kind == "" {
		return idem.EnqueueParams{}, invalid("kind", "must not be empty")
	}
	p := idem.EnqueueParams{Kind: req.Kind, Args: rawOrNil(req.Args), Opts: &idem.EnqueueOpts{
		Tenant: tenant, Queue: req.Queue, Priority: req.Priority, MaxAttempts: req.MaxAttempts,
		RunAt: runAt, PartitionKey: req.PartitionKey, DependsOn: deps, Metadata: rawOrNil(req.Metadata),
		IdempotencyKey: req.IdempotencyKey, DedupWindow: dedup, ResultTTL: ttl}}
	if timeout != nil {
		p.Opts.Timeout = *timeout
	}
	if req.MaxAttempts < 0 {
		return p, invalid("max_attempts", "must be between 1 and 1000")
	}
	if req.Retry != nil {
		pol, attempts, err := parseRetry(req.Retry)
		if err != nil {
			return p, err
		}
		if attempts > 0 {
			if req.MaxAttempts != 0 && req.MaxAttempts != attempts {
				return p, invalid("retry.max_attempts", "differs from max_attempts")
			}
			p.Opts.MaxAttempts = attempts
		}
		p.Opts.Retry = pol
	}
	return p, nil
}

// parseRetry validates a job's own retry policy at the edge with the one
// parser of the retry object (internal/retryspec, which the CLI shares),
// naming the field of any bad value (retry.base, retry.factor, …), and
// returns it with its max_attempts (0 = not given).
func parseRetry(r *wire.RetrySpec) (*idem.RetryPolicy, int, error) {
	pol, attempts, err := retryspec.Parse(r)
	return pol, attempts, asProblem(err)
}

// decodeEnqueue decodes and validates the body of POST /v1/jobs with the
// header key hk ("" = none).
func (s *Server) decodeEnqueue(body []byte, tenant, hk string) (idem.EnqueueParams, error) {
	var req wire.EnqueueRequest
	if err := decodeStrict(body, &req); err != nil {
		return idem.EnqueueParams{}, err
	}
	if explicitZero(body, "max_attempts") {
		return idem.EnqueueParams{}, invalid("max_attempts", "must be between 1 and 1000")
	}
	if hk != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != hk {
			return idem.EnqueueParams{}, invalid("idempotency_key", "differs from the Idempotency-Key header")
		}
		req.IdempotencyKey = hk
	}
	return enqueueInput(tenant, &req)
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	hk, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := readBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	p, err := s.decodeEnqueue(body, tenantOf(r), hk)
	if err != nil {
		return err
	}
	res, err := s.client.EnqueueRaw(r.Context(), p)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Existing {
		status = http.StatusOK
		setHeader(w.Header(), headerIdempotentReplayed, "true")
	}
	setHeader(w.Header(), "Location", "/v1/jobs/"+formatID(res.Job.ID))
	var job wire.Job // on the stack: writeEnqueueReply keeps no pointer to it
	renderJobInto(&job, res.Job, false)
	writeEnqueueReply(w, status, &wire.EnqueueReply{Job: &job, Existing: res.Existing})
	return nil
}

// batchItemKey is the key of item i of a batch sent with the header
// Idempotency-Key k: "k:<i>", or, when that would be longer than a key may
// be, "sha256:<hex of k>:<i>". Both depend only on k and i, so a retried
// batch creates nothing twice, and the keys that fit are those they always
// were.
func batchItemKey(k string, i int) string {
	suffix := ":" + strconv.Itoa(i)
	return key.Fit(k, idem.MaxKeyLength-len(suffix)) + suffix
}

// enqueueBatch inserts up to MaxBatch jobs; one bad item fails only itself.
// A header Idempotency-Key K gives each item without its own key the key
// batchItemKey(K, index), so a retried batch creates nothing twice.
func (s *Server) enqueueBatch(w http.ResponseWriter, r *http.Request) error {
	hk, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := readBody(r, s.cfg.MaxBodyBytes, false)
	if err != nil {
		return err
	}
	var req wire.BatchRequest
	if err := decodeEnvelope(body, &req); err != nil {
		return err
	}
	if len(req.Jobs) == 0 {
		return invalid("jobs", "must hold at least one job")
	}
	if len(req.Jobs) > MaxBatch {
		return invalid("jobs", fmt.Sprintf("a batch holds at most %d jobs, not %d", MaxBatch, len(req.Jobs)))
	}
	tenant := tenantOf(r)
	results := make([]wire.BatchItem, len(req.Jobs))
	var valid []idem.EnqueueParams
	var index []int
	for i, raw := range req.Jobs {
		var item wire.EnqueueRequest
		err := decodeStrict(raw, &item)
		if err == nil && explicitZero(raw, "max_attempts") {
			err = invalid("max_attempts", "must be between 1 and 1000")
		}
		var p idem.EnqueueParams
		if err == nil {
			if item.IdempotencyKey == "" && hk != "" {
				item.IdempotencyKey = batchItemKey(hk, i)
			}
			p, err = s.enqueueParams(tenant, &item)
		}
		if err != nil {
			results[i].Error = problemFor(err)
			continue
		}
		valid = append(valid, p)
		index = append(index, i)
	}
	if len(valid) > 0 {
		res, err := s.client.EnqueueMany(r.Context(), valid)
		if err != nil {
			return err
		}
		for k, rr := range res {
			i := index[k]
			if rr.Err != nil {
				results[i].Error = problemFor(rr.Err)
				continue
			}
			existing := rr.Existing
			results[i] = wire.BatchItem{Job: renderJob(rr.Job, false), Existing: &existing}
		}
	}
	writeJSON(w, http.StatusOK, wire.BatchReply{Results: results})
	return nil
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	job, err := s.client.JobGet(r.Context(), tenantOf(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderJob(job, false))
	return nil
}

// listQuery parses the query of job lists. Each parameter is given at
// most once; a filter is not empty (queryValue) and state is a list
// without empty items (queryList); an empty cursor is the first page.
func listQuery(q url.Values, tenant string) (*idem.JobListParams, error) {
	p := &idem.JobListParams{Limit: DefaultListLimit}
	f := &p.Filter
	f.Tenant = tenant
	states, err := queryList(q, "state")
	if err != nil {
		return nil, err
	}
	for _, s := range states {
		st := idemtype.JobState(s)
		if !st.Valid() {
			return nil, invalid("state", fmt.Sprintf("unknown state %q", s))
		}
		f.States = append(f.States, st)
	}
	for _, t := range []struct {
		name string
		dst  *string
	}{{"queue", &f.Queue}, {"kind", &f.Kind}, {"partition_key", &f.PartitionKey}, {"idempotency_key", &f.IdempotencyKey}} {
		if *t.dst, _, err = queryValue(q, t.name); err != nil {
			return nil, err
		}
	}
	if err = deadLetterQuery(q, f); err != nil {
		return nil, err
	}
	for _, name := range []string{"since", "until", "finished_since", "limit", "cursor"} {
		if err := queryOnce(q, name); err != nil {
			return nil, err
		}
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}, {"finished_since", &f.FinishedSince}} {
		if q.Has(t.name) { // since= (empty) is no time, not "any time"
			v := q.Get(t.name)
			if v == "" {
				return nil, invalid(t.name, `"" is not an RFC 3339 time with a zone`)
			}
			if *t.dst, err = parseTime(t.name, &v); err != nil {
				return nil, err
			}
		}
	}
	if q.Has("limit") { // limit= (empty) is no number, not the default
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 {
			return nil, invalid("limit", "must be a positive integer")
		}
		p.Limit = min(n, MaxListLimit)
	}
	if v := q.Get("cursor"); v != "" { // cursor= (empty) is the first page
		if p.Cursor, err = decodeCursor(v); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func encodeCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("j" + formatID(id)))
}

func decodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > 1 && b[0] == 'j' {
		if id, ok := parseID(string(b[1:])); ok {
			return id, nil
		}
	}
	return 0, invalid("cursor", "malformed cursor")
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	p, err := listQuery(r.URL.Query(), tenantOf(r))
	if err != nil {
		return err
	}
	return s.writeList(w, r, p)
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.decodeBody(r, &struct{}{}, true); err != nil {
		return err
	}
	job, err := s.client.JobCancel(r.Context(), tenantOf(r), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderJob(job, false))
	return nil
}

func (s *Server) retryJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var req wire.RetryRequest
	if err := s.decodeBody(r, &req, true); err != nil {
		return err
	}
	runAt, err := parseTime("run_at", req.RunAt)
	if err != nil {
		return err
	}
	job, err := s.client.JobRetry(r.Context(), tenantOf(r), id, runAt)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, renderJob(job, false))
	return nil
}

func (s *Server) attempts(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	list, err := s.client.JobAttempts(r.Context(), tenantOf(r), id)
	if err != nil {
		return err
	}
	out := wire.AttemptList{Attempts: make([]*wire.Attempt, 0, len(list))}
	for _, a := range list {
		out.Attempts = append(out.Attempts, renderAttempt(a))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jobFilter converts a body filter.
func jobFilter(f *wire.Filter, tenant string) (idem.JobFilter, error) {
	out := idem.JobFilter{Tenant: tenant, Queue: f.Queue, Kind: f.Kind, PartitionKey: f.PartitionKey,
		IdempotencyKey: f.IdempotencyKey, ErrorCode: f.ErrorCode, Resolved: f.Resolved}
	for _, s := range f.State {
		st := idemtype.JobState(s)
		if !st.Valid() {
			return out, invalid("filter.state", fmt.Sprintf("unknown state %q", s))
		}
		out.States = append(out.States, st)
	}
	var err error
	if out.Since, err = parseTime("filter.since", f.Since); err != nil {
		return out, err
	}
	if out.Until, err = parseTime("filter.until", f.Until); err != nil {
		return out, err
	}
	return out, nil
}

func (s *Server) replay(w http.ResponseWriter, r *http.Request) error {
	var req wire.ReplayRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	f, err := jobFilter(&req.Filter, tenantOf(r))
	if err != nil {
		return err
	}
	if req.Queue != "" {
		if err := idem.ValidateName("queue", req.Queue); err != nil {
			return err
		}
	}
	// The copies are written in one transaction (idem.JobReplay): a 5xx
	// leaves none. The request's key names them (idem.ReplayParams.Key): a
	// retry after an answer lost once they were committed copies no job
	// twice. Only finished jobs are copied; the unfinished ones the filter
	// selects are counted in skipped (each still runs as itself).
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	res, err := s.client.JobReplayReport(r.Context(), &idem.ReplayParams{Filter: f, Queue: req.Queue, Limit: MaxReplay, Key: key})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ReplayReply{Enqueued: res.Enqueued, Skipped: res.Skipped})
	return nil
}

func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	states, err := queryList(q, "state")
	if err != nil {
		return err
	}
	for _, st := range states {
		if st != string(idemtype.StateDead) {
			return invalid("state", "the dead-letter queue holds dead jobs only")
		}
	}
	q.Del("state")
	p, err := listQuery(q, tenantOf(r))
	if err != nil {
		return err
	}
	p.Filter.States = []idemtype.JobState{idemtype.StateDead}
	return s.writeList(w, r, p)
}

func (s *Server) requeue(w http.ResponseWriter, r *http.Request) error {
	var req wire.RequeueRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	tenant := tenantOf(r)
	ids, err := parseIDList("ids", req.IDs)
	if err != nil {
		return err
	}
	if len(ids) > MaxBatch {
		return invalid("ids", fmt.Sprintf("at most %d ids", MaxBatch))
	}
	var f idem.JobFilter
	switch {
	case len(ids) > 0 && req.Filter != nil:
		return invalid("ids", "send ids or filter, not both")
	case len(ids) > 0:
		for _, id := range ids {
			if _, err := s.client.JobGet(r.Context(), tenant, id); err != nil {
				if errors.Is(err, idemtype.ErrNotFound) {
					return fmt.Errorf("job %d: %w", id, err)
				}
				return err
			}
		}
		f.Tenant = tenant
	case req.Filter != nil:
		if f, err = jobFilter(req.Filter, tenant); err != nil {
			return err
		}
	default:
		return invalid("ids", "send ids or filter")
	}
	n, err := s.client.DLQRequeue(r.Context(), ids, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.RequeueReply{Requeued: n})
	return nil
}

func (s *Server) deleteDead(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	if err := s.client.DLQDelete(r.Context(), tenantOf(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
