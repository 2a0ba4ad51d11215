package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem/idemclient"
	"github.com/idem-dev/idem/idemtype"
)

// Paging of the job lists.
const (
	defaultPageSize = 50
	maxPageSize     = 200
)

// valueMatch selects jobs whose args (or metadata) hold Value at Path, a
// dot-separated path of object keys: "customer.id=42".
type valueMatch struct {
	Path  []string
	Value string
}

// jobQuery is a job-list filter as the form sends it.
type jobQuery struct {
	Queue, Kind, State, PartitionKey, Since, Until, Args, Meta, Cursor string
	Limit                                                              int

	list       idemclient.ListParams
	args, meta *valueMatch
}

// parseJobQuery validates the form; each error names its field.
func parseJobQuery(q url.Values) (*jobQuery, []string) {
	jq := &jobQuery{Queue: q.Get("queue"), Kind: q.Get("kind"), State: q.Get("state"),
		PartitionKey: q.Get("partition_key"), Since: q.Get("since"), Until: q.Get("until"),
		Args: q.Get("args"), Meta: q.Get("meta"), Cursor: q.Get("cursor"), Limit: defaultPageSize}
	var errs []string
	p := &jq.list
	p.Queue, p.Kind, p.PartitionKey, p.Cursor = jq.Queue, jq.Kind, jq.PartitionKey, jq.Cursor
	if jq.State != "" {
		if !idemtype.JobState(jq.State).Valid() {
			errs = append(errs, fmt.Sprintf("State: %q is not a job state.", jq.State))
		} else {
			p.States = []string{jq.State}
		}
	}
	var err error
	if p.Since, err = parseFormTime(jq.Since); err != nil {
		errs = append(errs, "Created from: "+err.Error())
	}
	if p.Until, err = parseFormTime(jq.Until); err != nil {
		errs = append(errs, "Created before: "+err.Error())
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		errs = append(errs, "Created before must be later than Created from.")
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			errs = append(errs, fmt.Sprintf("Page size: must be a whole number from 1 to %d.", maxPageSize))
		} else {
			jq.Limit = n
		}
	}
	p.Limit = jq.Limit
	if jq.args, err = parseValueMatch(jq.Args); err != nil {
		errs = append(errs, "Args value: "+err.Error())
	}
	if jq.meta, err = parseValueMatch(jq.Meta); err != nil {
		errs = append(errs, "Metadata value: "+err.Error())
	}
	return jq, errs
}

// parseFormTime reads a datetime-local value (UTC) or RFC 3339.
func parseFormTime(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time; use 2026-11-26T04:30 (UTC) or RFC 3339", v)
}

// parseValueMatch reads "path=value".
func parseValueMatch(v string) (*valueMatch, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	path, val, ok := strings.Cut(v, "=")
	path = strings.TrimSpace(path)
	if !ok || path == "" {
		return nil, fmt.Errorf("%q: write key=value, e.g. customer=acme or order.id=42", v)
	}
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q: the key path has an empty part", path)
		}
	}
	return &valueMatch{Path: parts, Value: strings.TrimSpace(val)}, nil
}

// match reports whether raw holds the value at the path: a string equal to
// it, or a number, boolean or null whose JSON text equals it.
func (m *valueMatch) match(raw json.RawMessage) bool {
	if m == nil {
		return true
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	for _, k := range m.Path {
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = obj[k]; !ok {
			return false
		}
	}
	switch x := v.(type) {
	case string:
		return x == m.Value
	case map[string]any, []any:
		return false
	default:
		b, _ := json.Marshal(x)
		return string(b) == m.Value
	}
}

// scanned is one page of a list the dashboard filtered itself.
type scanned struct {
	Jobs       []*idemclient.Job
	NextCursor string
	Scanned    int
	Truncated  bool // ScanLimit reached before the page was full
}

// listJobs returns one page of jobs for the query through the API list
// (dlq selects GET /v1/dlq). With an args or metadata filter it pages the
// API list, asking each time for at most the jobs still missing, so the
// API's cursor always resumes exactly after the last job examined.
func (h *Handler) listJobs(ctx context.Context, cl *idemclient.Client, jq *jobQuery, dlq bool) (*scanned, error) {
	return scanJobs(ctx, cl, jq, dlq, h.cfg.ScanLimit)
}

// scanJobs is listJobs with an explicit bound on the jobs scanned.
func scanJobs(ctx context.Context, cl *idemclient.Client, jq *jobQuery, dlq bool, scanLimit int) (*scanned, error) {
	list := cl.ListJobs
	if dlq {
		list = cl.DLQList
	}
	p := jq.list
	out := &scanned{}
	for {
		p.Limit = jq.Limit - len(out.Jobs)
		page, err := list(ctx, &p)
		if err != nil {
			return nil, err
		}
		out.Scanned += len(page.Jobs)
		for _, j := range page.Jobs {
			if jq.args.match(j.Args) && jq.meta.match(j.Metadata) {
				out.Jobs = append(out.Jobs, j)
			}
		}
		out.NextCursor = page.NextCursor
		if page.NextCursor == "" || len(out.Jobs) >= jq.Limit {
			return out, nil
		}
		if out.Scanned >= scanLimit {
			out.Truncated = true
			return out, nil
		}
		p.Cursor = page.NextCursor
	}
}
