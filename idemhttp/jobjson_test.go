package idemhttp

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/internal/retryspec"
)

var (
	trickyStrings = []string{"", "a", "job-1", "<a&b>", "q\"uote\\", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"é€😀", "\u2028\u2029", "\xff\xfe", "a\xe2\x80", "tenant/queue:1"}
	trickyRaws = []string{"", "{}", "null", `{"a":1}`, `[1,"x",true,null]`, `"s"`, `{"h":"<b>&"}`, ` {"a": 1} `,
		"{\n}", `{"u":"` + "\u2028" + `"}`, `{"e":"€"}`, `{"bad":`, `{"x":"\xff"}`, "1e400", `{"a":{"b":[]}}`}
	trickyTimes = []time.Time{{}, time.Unix(1700000000, 123456789).UTC(), time.Unix(0, 0).UTC(),
		time.Date(2026, 11, 26, 15, 4, 5, 0, time.FixedZone("x", -7*3600-30*60)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("y", 24*3600))}
)

// fillJob sets every field of a wire.Job from rng; a field of a type it
// does not know fails the test, so a new field of wire.Job is either
// covered by appendJob and this test or noticed.
func fillJob(t testing.TB, rng *rand.Rand) *wire.Job {
	t.Helper()
	j := &wire.Job{}
	v := reflect.ValueOf(j).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Interface().(type) {
		case string:
			f.SetString(trickyStrings[rng.IntN(len(trickyStrings))])
		case int:
			f.SetInt(rng.Int64N(2001) - 1000)
		case bool:
			f.SetBool(rng.IntN(2) == 0)
		case time.Time:
			f.Set(reflect.ValueOf(trickyTimes[rng.IntN(len(trickyTimes))]))
		case *time.Time:
			if rng.IntN(2) == 0 {
				tm := trickyTimes[rng.IntN(len(trickyTimes))]
				f.Set(reflect.ValueOf(&tm))
			}
		case json.RawMessage:
			if r := trickyRaws[rng.IntN(len(trickyRaws))]; r != "" {
				f.Set(reflect.ValueOf(json.RawMessage(r)))
			}
		case []string:
			for range rng.IntN(3) {
				f.Set(reflect.Append(f, reflect.ValueOf(trickyStrings[rng.IntN(len(trickyStrings))])))
			}
		case *wire.RetrySpec:
			if rng.IntN(2) == 0 {
				n, fac, base := rng.IntN(10), rng.Float64()*3, "5s"
				f.Set(reflect.ValueOf(&wire.RetrySpec{MaxAttempts: &n, Factor: &fac, Base: &base, Delays: []string{"1s", "<2s>"}}))
			}
		default:
			t.Fatalf("wire.Job.%s: a %s this test (and maybe appendJob) does not know", v.Type().Field(i).Name, f.Type())
		}
	}
	return j
}

// stdJSON is encoding/json's encoding of v as the API writes JSON: no
// HTML escaping, no trailing newline.
func stdJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkJobJSON fails unless appendJob writes what encoding/json writes
// without HTML escaping, or declines where encoding/json fails.
func checkJobJSON(t testing.TB, j *wire.Job) (fast bool) {
	t.Helper()
	hand, ok := appendJob(nil, j)
	std, err := stdJSON(j)
	switch {
	case err != nil && ok:
		t.Fatalf("encoding/json fails (%v) but appendJob wrote %s", err, hand)
	case ok && !bytes.Equal(hand, std):
		t.Fatalf("appendJob:\n%s\nencoding/json:\n%s", hand, std)
	}
	return ok
}

// TestAppendJobMatchesMarshal: for jobs with every field set to awkward
// values (HTML characters, invalid UTF-8, line separators, raw values that
// need compacting or are invalid, times json.Marshal refuses), appendJob
// writes encoding/json's bytes (SetEscapeHTML(false)) or declines.
func TestAppendJobMatchesMarshal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for range 5000 {
		if checkJobJSON(t, fillJob(t, rng)) {
			fast++
		}
	}
	// A typical job: the fast path.
	now := time.Now().UTC()
	if !checkJobJSON(t, &wire.Job{ID: "1", Tenant: "default", Queue: "q", Kind: "k", Args: json.RawMessage(`{"i":1}`),
		State: "available", MaxAttempts: 25, RunAt: now, CreatedAt: now, IdempotencyKey: "new-1"}) {
		t.Fatal("a typical job took the fallback")
	}
	if fast == 0 {
		t.Fatal("no random job took the fast path")
	}
	// HTML characters and line separators in raw values are copied as
	// they are: the fast path.
	if !checkJobJSON(t, &wire.Job{ID: "2", Kind: "k<&>", Args: json.RawMessage(`{"h":"<b>&` + "\u2028" + `"}`),
		RunAt: now, CreatedAt: now}) {
		t.Fatal("a job with HTML characters took the fallback")
	}
}

// FuzzAppendJob: appendJob agrees with encoding/json (SetEscapeHTML(false))
// on any strings, raw values and times.
func FuzzAppendJob(f *testing.F) {
	f.Add("k", "<q>", []byte(`{"a":1}`), []byte(`null`), int64(1700000000123456789), int32(0))
	f.Add("\xff", "\u2028", []byte(` [1] `), []byte(`{"x":"€"}`), int64(-62135596800000000), int32(-3600))
	f.Fuzz(func(t *testing.T, kind, key string, args, meta []byte, nanos int64, offset int32) {
		tm := time.Unix(0, nanos).In(time.FixedZone("z", int(offset)))
		j := &wire.Job{ID: "7", Kind: kind, IdempotencyKey: key, LastError: kind + key, Args: args, Metadata: meta,
			Result: meta, RunAt: tm, CreatedAt: tm.UTC(), StartedAt: &tm, DependsOn: []string{key}}
		checkJobJSON(t, j)
	})
}

// TestWriteEnqueueReply: the reply is writeJSON's, headers and body, on
// the fast path and on the fallback.
func TestWriteEnqueueReply(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 15, 0, 0, 1, time.UTC)
	for _, reply := range []*wire.EnqueueReply{
		{Job: &wire.Job{ID: "3", Kind: "k", Args: json.RawMessage(`{}`), RunAt: now, CreatedAt: now}, Existing: true},
		{Job: &wire.Job{ID: "4", Kind: "k<", Args: json.RawMessage(`{ "a" : 1 }`), RunAt: now, CreatedAt: now}},
		{Job: &wire.Job{ID: "5", Args: json.RawMessage(`{}`), RunAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{},
	} {
		hand, std := httptest.NewRecorder(), httptest.NewRecorder()
		writeEnqueueReply(hand, 201, reply)
		writeJSON(std, 201, reply)
		if hand.Code != std.Code || !reflect.DeepEqual(hand.Header(), std.Header()) || hand.Body.String() != std.Body.String() {
			t.Fatalf("writeEnqueueReply: %d %v %s\nwriteJSON: %d %v %s", hand.Code, hand.Header(), hand.Body,
				std.Code, std.Header(), std.Body)
		}
	}
}

// worstRaw is a raw JSON value of MaxArgsBytes made of the characters
// JSON escapes most: HTML characters and line separators.
func worstRaw() json.RawMessage {
	const frame = len(`{"b":""}`)
	body := strings.Repeat("<&>\u2028", (idem.MaxArgsBytes-frame)/6)
	body += strings.Repeat("<", idem.MaxArgsBytes-frame-len(body))
	return json.RawMessage(`{"b":"` + body + `"}`)
}

// worstJob is a job in a reply with every field at its largest encoding:
// names and keys of MaxKeyLength quotes and HTML characters, a last error
// and a note of control characters, the most dependencies and delays.
func worstJob(withResult bool) *wire.Job {
	name := strings.Repeat(`"<`, idem.MaxKeyLength/2) + `"`
	id := strconv.FormatInt(math.MaxInt64, 10)
	at := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("z", -(23*3600+59*60)))
	raw := worstRaw()
	n := idem.MaxMaxAttempts
	fac, jit := math.MaxFloat64, -math.SmallestNonzeroFloat64
	longest := time.Duration(math.MinInt64).String()
	retry := &wire.RetrySpec{MaxAttempts: &n, Base: &longest, Factor: &fac, Max: &longest, Jitter: &jit}
	for range retryspec.MaxDelays {
		retry.Delays = append(retry.Delays, longest)
	}
	j := &wire.Job{ID: id, Tenant: name, Queue: name, Kind: name, Args: raw, State: "available",
		Priority: math.MinInt32, Attempt: n, MaxAttempts: n, RunAt: at, CreatedAt: at, StartedAt: &at, FinishedAt: &at,
		PartitionKey: name, IdempotencyKey: name, OriginalJobID: id, WasCached: true,
		LastError: strings.Repeat("\x01", idem.MaxErrorBytes), ErrorCode: name, Metadata: raw, WorkerID: name,
		Retry: retry, LeaseToken: name, LeaseExpiresAt: &at}
	for range idem.MaxDependsOn {
		j.DependsOn = append(j.DependsOn, id)
	}
	if withResult {
		j.Result, j.ResolvedAt, j.ResolutionNote = raw, &at, strings.Repeat("\x01", idem.MaxResolutionNote)
	}
	return j
}

// replySize is the length of the body writeJSON writes for v.
func replySize(t *testing.T, v any) int {
	t.Helper()
	w := httptest.NewRecorder()
	writeJSON(w, 200, v)
	if w.Code != 200 {
		t.Fatalf("writeJSON: %d %s", w.Code, w.Body.String()[:min(w.Body.Len(), 300)])
	}
	return w.Body.Len()
}

// TestReplyCapsHoldWorstCase: the caps up to which the Idempotency-Key
// middleware stores the replies of a claim, of one job and of a result
// lease hold the largest reply each can be, so that the retry of any
// such call after a lost reply replays it. (A claim of MaxClaimLimit such
// jobs is sized from one: its jobs are written one after the other.)
func TestReplyCapsHoldWorstCase(t *testing.T) {
	t.Parallel()
	if n := replySize(t, worstJob(true)); n > maxJobReplyBytes {
		t.Errorf("a one-job reply of %d bytes is over maxJobReplyBytes (%d)", n, maxJobReplyBytes)
	}
	at := time.Now()
	empty := wire.ClaimReply{Jobs: []*wire.Job{}, Throttled: true, NextAvailableAt: &at, RetryAfter: (time.Duration(math.MaxInt64)).String()}
	one := empty
	one.Jobs = []*wire.Job{worstJob(false)}
	base, perJob := replySize(t, empty), replySize(t, one)-replySize(t, empty)+len(",")
	if n := base + idem.MaxClaimLimit*perJob; n > maxClaimReplyBytes {
		t.Errorf("a claim reply of %d jobs of %d bytes is over maxClaimReplyBytes (%d)", idem.MaxClaimLimit, perJob, maxClaimReplyBytes)
	}
	ms := int64(math.MinInt64)
	lease := &wire.LeaseReply{Key: strings.Repeat(`"`, idem.MaxKeyLength), Acquired: true, LeaseToken: strings.Repeat(`"`, idem.MaxKeyLength),
		LeaseExpiresAt: &at, Cached: true, Result: worstRaw(), OriginalJobID: strconv.FormatInt(math.MaxInt64, 10),
		StoredAt: &at, DurationMS: &ms}
	if n := replySize(t, lease); n > maxLeaseReplyBytes {
		t.Errorf("a result-lease reply of %d bytes is over maxLeaseReplyBytes (%d)", n, maxLeaseReplyBytes)
	}
}
