package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/idemhttp/wire"
)

// every is one value of each reply and request type of the API.
var every = []any{
	wire.Job{}, wire.JobPage{}, wire.Attempt{}, wire.AttemptList{}, wire.Problem{}, wire.EnqueueRequest{},
	wire.EnqueueReply{}, wire.BatchRequest{}, wire.BatchItem{}, wire.BatchReply{}, wire.Filter{}, wire.ReplayRequest{},
	wire.ReplayReply{}, wire.RequeueRequest{}, wire.RequeueReply{}, wire.RetryRequest{}, wire.ClaimRequest{},
	wire.HeartbeatRequest{}, wire.HeartbeatReply{}, wire.CompleteRequest{}, wire.FailRequest{}, wire.ResolveRequest{},
	wire.Record{}, wire.CacheStats{}, wire.Percentiles{}, wire.QueueStats{}, wire.Stats{}, wire.TargetStats{}, wire.KindStats{},
	wire.TargetPut{}, wire.Target{}, wire.TargetList{}, wire.SubscriptionPut{}, wire.Subscription{},
	wire.SubscriptionList{}, wire.PublishRequest{}, wire.PublishReply{}, wire.Event{}, wire.EventList{},
	wire.EventReplayRequest{}, wire.EventReplayReply{}, wire.BatchCreateRequest{}, wire.Batch{},
	wire.BatchCreateReply{}, wire.LeaseRequest{}, wire.LeaseReply{}, wire.LeaseTokenRequest{},
	wire.LeaseCompleteRequest{}, wire.LeaseRenewReply{}, wire.LimitRequest{}, wire.Limit{}, wire.Usage{},
	wire.LimitList{}, wire.PauseRequest{}, wire.PauseReply{}, wire.PausedScope{}, wire.ScheduleRequest{},
	wire.Schedule{}, wire.ScheduleList{}, wire.TriggerRequest{}, wire.RetrySpec{}, wire.ClaimReply{},
}

// TestEveryTypeIsChecked keeps the list above complete: every struct type
// declared in the package is in it.
func TestEveryTypeIsChecked(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, v := range every {
		listed[reflect.TypeOf(v).Name()] = true
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() && !listed[ts.Name.Name] {
					t.Errorf("wire.%s is not in the list of checked types", ts.Name.Name)
				}
			}
		}
	}
}

// timeName reports whether a JSON field name holds a time.
func timeName(name string) bool {
	switch name {
	case "since", "until", "from", "to", "window_start":
		return true
	}
	return strings.HasSuffix(name, "_at")
}

// emptyTimes returns the paths of time fields rendered as "" in v.
func emptyTimes(path string, v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && s == "" && timeName(k) {
				out = append(out, path+"."+k)
			}
			out = append(out, emptyTimes(path+"."+k, x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, emptyTimes(path+"[]", x)...)
		}
	}
	return out
}

// filled returns a value of type t with every field set: strings are "x",
// pointers point at filled values, slices and maps hold one filled
// element, recursively. (A string is never "" here, so only a field
// rendered from something else, a time, can come out as "".)
func filled(t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	if depth > 4 {
		return v
	}
	switch t.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Pointer:
		v.Set(filled(t.Elem(), depth+1).Addr())
	case reflect.Struct:
		if t == reflect.TypeOf(time.Time{}) {
			return v
		}
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(filled(t.Field(i).Type, depth+1))
			}
		}
	case reflect.Slice:
		if t == reflect.TypeOf(json.RawMessage{}) {
			v.SetBytes([]byte("{}"))
			return v
		}
		v.Set(reflect.Append(v, filled(t.Elem(), depth+1)))
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(filled(t.Key(), depth+1), filled(t.Elem(), depth+1))
	}
	return v
}

// TestTimesAreNeverEmptyStrings: API.md — a time that does not exist is
// null or absent, never "". The zero value of every type catches a time
// kept in a plain string field without omitempty (usage.window_start was
// one); the filled value catches times rendered from optional parts.
func TestTimesAreNeverEmptyStrings(t *testing.T) {
	t.Parallel()
	for _, v := range every {
		typ := reflect.TypeOf(v)
		for _, val := range []any{v, filled(typ, 0).Interface()} {
			b, err := json.Marshal(val)
			if err != nil {
				t.Fatalf("%s: %v", typ.Name(), err)
			}
			var m any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if bad := emptyTimes(typ.Name(), m); len(bad) > 0 {
				t.Errorf("%s renders empty times %v: %s", typ.Name(), bad, b)
			}
		}
	}
}

func TestListsOfRepliesAreNeverNull(t *testing.T) {
	t.Parallel()
	// A reply built with an empty (not nil) list renders [], which the
	// server relies on for "lists are never null".
	for _, tc := range []struct {
		v    any
		want string
	}{
		{wire.JobPage{Jobs: []*wire.Job{}}, `{"jobs":[]}`},
		{wire.LimitList{Limits: []wire.Limit{}}, `{"limits":[]}`},
		{wire.EventList{Events: []*wire.Event{}}, `{"events":[]}`},
		{wire.AttemptList{Attempts: []*wire.Attempt{}}, `{"attempts":[]}`},
	} {
		b, _ := json.Marshal(tc.v)
		if string(b) != tc.want {
			t.Errorf("%T: %s, want %s", tc.v, b, tc.want)
		}
	}
}

func TestJobRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 9, 30, 15, 123456000, time.UTC)
	later := at.Add(time.Minute)
	in := wire.Job{ID: "42", Tenant: "acme", Queue: "mail", Kind: "send", Args: json.RawMessage(`{"to":"a@x"}`),
		State: "completed", Priority: 2, Attempt: 1, MaxAttempts: 5, RunAt: at, CreatedAt: at, StartedAt: &at,
		FinishedAt: &later, PartitionKey: "p", IdempotencyKey: "k", DependsOn: []string{"7", "8"},
		Result: json.RawMessage(`{"ok":true}`), WasCached: true, OriginalJobID: "40", LastError: "boom",
		ErrorCode: "E", ResolvedAt: &later, ResolutionNote: "n", Metadata: json.RawMessage(`{"m":1}`), WorkerID: "w",
		LeaseToken: "tok", LeaseExpiresAt: &later}
	b, err := json.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out wire.Job
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip\n in %+v\nout %+v", in, out)
	}
	if !bytes.Contains(b, []byte(`"run_at":"2026-11-26T09:30:15.123456Z"`)) {
		t.Errorf("run_at is not RFC 3339 with its fraction: %s", b)
	}
}

func TestJobOptionalFieldsAreAbsent(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(wire.Job{ID: "1", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"started_at", "finished_at", "partition_key", "idempotency_key", "depends_on", "result",
		"original_job_id", "last_error", "error_code", "resolved_at", "resolution_note", "metadata", "worker_id",
		"lease_token", "lease_expires_at"} {
		if _, ok := m[k]; ok {
			t.Errorf("unset %s is rendered: %s", k, b)
		}
	}
	for _, k := range []string{"id", "tenant", "queue", "kind", "args", "state", "priority", "attempt", "max_attempts",
		"run_at", "created_at", "was_cached"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s is missing: %s", k, b)
		}
	}
}

func TestRecordRendersOpenEndsAsNull(t *testing.T) {
	t.Parallel()
	// dedup_until and expires_at are null (not absent) while they depend
	// on an unfinished job (API.md).
	b, _ := json.Marshal(wire.Record{Key: "k", Status: "in_progress", CreatedAt: time.Unix(0, 0).UTC()})
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"dedup_until", "expires_at"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null: %s", k, v, ok, b)
		}
	}
	if _, ok := m["completed_at"]; ok {
		t.Errorf("completed_at of an unfinished record: %s", b)
	}
}

func TestRequestsLeaveOutUnsetFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want string
	}{
		{wire.EnqueueRequest{Kind: "k"}, `{"kind":"k"}`},
		{wire.ClaimRequest{Queues: []string{"q"}, WorkerID: "w"}, `{"queues":["q"],"worker_id":"w"}`},
		{wire.FailRequest{LeaseToken: "t", Error: "e"}, `{"lease_token":"t","error":"e"}`},
		{wire.Filter{}, `{}`},
		{wire.LimitRequest{}, `{}`},
		{wire.RequeueRequest{IDs: wire.JobIDs([]string{"1", "2"})}, `{"ids":["1","2"]}`},
		{wire.TargetPut{URL: "u", Secrets: &[]string{}}, `{"url":"u","secrets":[]}`}, // [] = unsigned, not "generate"
		{wire.SubscriptionPut{URL: "u", Secret: new(string)}, `{"url":"u","secret":""}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T: %s %v, want %s", tc.v, b, err, tc.want)
		}
	}
}

func TestRequestsAcceptNullForOptionalFields(t *testing.T) {
	t.Parallel()
	var r wire.EnqueueRequest
	err := json.Unmarshal([]byte(`{"kind":"k","run_at":null,"dedup_window":null,"depends_on":null,"timeout":null,"args":null}`), &r)
	if err != nil || r.RunAt != nil || r.DedupWindow != nil || r.DependsOn != nil || r.Timeout != nil {
		t.Errorf("nulls: %+v %v", r, err)
	}
}

func TestStringList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`"dead"`, []string{"dead"}},
		{`"dead,cancelled"`, []string{"dead", "cancelled"}},
		{`" dead , cancelled "`, []string{"dead", "cancelled"}},
		{`["dead","cancelled"]`, []string{"dead", "cancelled"}},
		{`["dead,retryable","cancelled"]`, []string{"dead", "retryable", "cancelled"}},
		{`null`, nil},
	} {
		var f wire.Filter
		if err := json.Unmarshal([]byte(`{"state":`+tc.in+`}`), &f); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual([]string(f.State), tc.want) {
			t.Errorf("%s: %q, want %q", tc.in, f.State, tc.want)
		}
	}
	// An empty item names nothing: dropping it took "" and [] for every
	// state.
	for _, empty := range []string{`" dead , ,cancelled "`, `["dead,retryable"," ","cancelled"]`, `""`, `[]`, `"dead,"`, `[""]`} {
		var f wire.Filter
		err := json.Unmarshal([]byte(`{"state":`+empty+`}`), &f)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Value != wire.EmptyListItem || te.Field != "state" {
			t.Errorf("state %s: %v, want a type error naming state with Value EmptyListItem", empty, err)
		}
	}
	for _, bad := range []string{`1`, `{"a":1}`, `[1,2]`, `true`} {
		var f wire.Filter
		err := json.Unmarshal([]byte(`{"state":`+bad+`}`), &f)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || !strings.Contains(err.Error(), "state") {
			t.Errorf("state %s: %v, want a type error naming state", bad, err)
		}
	}
	b, _ := json.Marshal(wire.Filter{State: wire.StringList{"dead", "cancelled"}})
	if string(b) != `{"state":["dead","cancelled"]}` {
		t.Errorf("encodes as %s, want an array", b)
	}
}

func TestSplitList(t *testing.T) {
	t.Parallel()
	got := wire.SplitList([]string{"a,b", "", " c ", ",,", "d"})
	if !reflect.DeepEqual(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("SplitList = %q", got)
	}
	if wire.SplitList(nil) != nil || wire.SplitList([]string{" , "}) != nil {
		t.Error("nothing to split must give nil")
	}
}

func TestJobID(t *testing.T) {
	t.Parallel()
	var r wire.RequeueRequest
	if err := json.Unmarshal([]byte(`{"ids":["12",34,"abc",1e3]}`), &r); err != nil {
		t.Fatal(err)
	}
	// Kept as text for the server to parse strictly: "1e3" is not an id.
	want := []wire.JobID{"12", "34", "abc", "1e3"}
	if !reflect.DeepEqual(r.IDs, want) {
		t.Errorf("ids %q, want %q", r.IDs, want)
	}
	for _, bad := range []string{`true`, `{"id":1}`, `[1]`} {
		if err := json.Unmarshal([]byte(`{"ids":[`+bad+`]}`), &r); err == nil {
			t.Errorf("id %s accepted", bad)
		}
	}
	if wire.JobIDs(nil) != nil || wire.JobIDs([]string{}) != nil {
		t.Error("JobIDs of nothing is not nil (it would render ids: [])")
	}
	b, _ := json.Marshal(wire.RequeueRequest{IDs: []wire.JobID{"5"}})
	if string(b) != `{"ids":["5"]}` {
		t.Errorf("ids encode as %s, want strings", b)
	}
}

func TestProblem(t *testing.T) {
	t.Parallel()
	p := &wire.Problem{Type: "/problems/not-found", Title: "Not found", Status: 404, Detail: "job 7"}
	if p.Error() != "Not found: job 7" {
		t.Errorf("Error() = %q", p.Error())
	}
	b, _ := json.Marshal(p)
	if string(b) != `{"type":"/problems/not-found","title":"Not found","status":404,"detail":"job 7"}` {
		t.Errorf("problem renders %s", b)
	}
	var back wire.Problem
	in := `{"type":"/problems/invalid-request","title":"Invalid request","status":400,"detail":"kind: required","errors":{"kind":"required"},"job_id":"9"}`
	if err := json.Unmarshal([]byte(in), &back); err != nil || back.Errors["kind"] != "required" || back.JobID != "9" {
		t.Errorf("decoded %+v %v", back, err)
	}
}

func TestBatchItemExistingIsTriState(t *testing.T) {
	t.Parallel()
	no := false
	for _, tc := range []struct {
		item wire.BatchItem
		want string
	}{
		{wire.BatchItem{Job: &wire.Job{ID: "1", Args: json.RawMessage(`{}`)}, Existing: &no}, `"existing":false`},
		{wire.BatchItem{Error: &wire.Problem{Status: 400}}, `"error"`},
	} {
		b, _ := json.Marshal(tc.item)
		if !bytes.Contains(b, []byte(tc.want)) {
			t.Errorf("%s does not contain %s", b, tc.want)
		}
	}
	b, _ := json.Marshal(wire.BatchItem{Error: &wire.Problem{Status: 400}})
	if bytes.Contains(b, []byte("existing")) || bytes.Contains(b, []byte(`"job"`)) {
		t.Errorf("a failed item renders a job or existing: %s", b)
	}
}
