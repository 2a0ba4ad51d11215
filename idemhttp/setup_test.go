package idemhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/sqlitetest"
	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/sqlitestore"
)

// opener opens a fresh, empty store for one test.
type opener func(t *testing.T) store.Store

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitetest.Path(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// env is one server over real HTTP with an admin key and two tenant keys.
type env struct {
	t      *testing.T
	st     store.Store
	client *idem.Client
	server *idemhttp.Server
	srv    *httptest.Server
	admin  string // admin key (tenant default)
	keyA   string // tenant "a"
	keyB   string // tenant "b"
}

type setupOpts struct {
	clientCfg *idem.Config
	serverCfg *idemhttp.Config
	start     bool // start the client (maintenance: rescuer)
}

func setup(t *testing.T, open opener, o *setupOpts) *env {
	t.Helper()
	if o == nil {
		o = &setupOpts{}
	}
	st := open(t)
	ccfg := o.clientCfg
	if ccfg == nil {
		ccfg = &idem.Config{DisableMaintenance: true}
	}
	client, err := idem.NewClient(st, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.start {
		if err := client.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			client.Stop(ctx)
		})
	}
	server, err := idemhttp.NewServer(client, st, o.serverCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openAPIValidator(t, server))
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, client: client, server: server, srv: srv}
	e.admin = e.newKey("default", true)
	e.keyA = e.newKey("a", false)
	e.keyB = e.newKey("b", false)
	return e
}

func (e *env) newKey(tenant string, admin bool) string {
	e.t.Helper()
	secret, k := idemhttp.NewAPIKey(tenant, admin, "test", time.Now())
	if err := e.st.APIKeyCreate(context.Background(), k); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// resp is one answer.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r *resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return m
}

// job returns the job of an enqueue reply or the body itself.
func (r *resp) job(t *testing.T) map[string]any {
	m := r.json(t)
	if j, ok := m["job"].(map[string]any); ok {
		return j
	}
	return m
}

// req sends a request with key (the bearer secret, "" = none); body is a
// string (sent as is), nil, or a value encoded as JSON. hdr holds header pairs.
func (e *env) req(method, path, key string, body any, hdr ...string) *resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	r, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			r.Header.Del(hdr[i])
			continue
		}
		r.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.srv.Client().Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: data}
}

// expect fails unless r has status (and, for problems, the type suffix).
func expect(t *testing.T, r *resp, status int, problemType string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if problemType != "" {
		if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("content type %q, want application/problem+json: %s", ct, r.body)
		}
		m := r.json(t)
		if m["type"] != problemType || m["title"] == "" || m["detail"] == nil || m["status"] != float64(status) {
			t.Fatalf("problem %s, want type %s", r.body, problemType)
		}
	}
}

// enqueue creates a job in the tenant of key and returns its id.
func (e *env) enqueue(key string, body map[string]any) string {
	e.t.Helper()
	r := e.req("POST", "/v1/jobs", key, body)
	if r.status != 201 && r.status != 200 {
		e.t.Fatalf("enqueue: %d %s", r.status, r.body)
	}
	return r.job(e.t)["id"].(string)
}

// countJobs counts every job of every tenant in the store.
func (e *env) countJobs() int {
	e.t.Helper()
	jobs, _, err := e.st.JobList(context.Background(), &store.JobListParams{Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(jobs)
}

// claim claims one job of queue in the tenant of key.
func (e *env) claim(key, queue string) map[string]any {
	e.t.Helper()
	r := e.req("POST", "/v1/claim", key, map[string]any{"queues": []string{queue}, "worker_id": "w1", "lease": "30s"})
	expect(e.t, r, 200, "")
	jobs := r.json(e.t)["jobs"].([]any)
	if len(jobs) != 1 {
		e.t.Fatalf("claimed %d jobs: %s", len(jobs), r.body)
	}
	return jobs[0].(map[string]any)
}

// dead makes a dead job in the tenant of key and returns its id.
func (e *env) dead(key, queue string) string {
	e.t.Helper()
	id := e.enqueue(key, map[string]any{"kind": "k", "queue": queue})
	j := e.claim(key, queue)
	if j["id"] != id {
		e.t.Fatalf("claimed %v, want %s", j["id"], id)
	}
	r := e.req("POST", "/v1/jobs/"+id+"/fail", key, map[string]any{"lease_token": j["lease_token"], "error": "boom", "retry": false})
	expect(e.t, r, 200, "")
	if s := r.json(e.t)["state"]; s != "dead" {
		e.t.Fatalf("state %v, want dead", s)
	}
	return id
}
