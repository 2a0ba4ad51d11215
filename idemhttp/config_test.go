package idemhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	var nilCfg *idemhttp.Config
	if err := nilCfg.Validate(); err != nil {
		t.Errorf("nil config: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  idemhttp.Config
		want string // a word of the error; "" = valid
	}{
		{"zero is every default", idemhttp.Config{}, ""},
		{"negative body limit", idemhttp.Config{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{"negative page limit", idemhttp.Config{MaxPageBytes: -1}, "MaxPageBytes"},
		{"negative ready window", idemhttp.Config{ReadyWriteWindow: -time.Second}, "ReadyWriteWindow"},
		{"negative metrics cache", idemhttp.Config{MetricsCacheTTL: -time.Second}, "MetricsCacheTTL"},
		{"negative metrics queues", idemhttp.Config{MetricsMaxQueues: -1}, "MetricsMaxQueues"},
		{"negative connections", idemhttp.Config{MaxConns: -1}, "connection limits"},
		{"negative read timeout", idemhttp.Config{ReadTimeout: -time.Second}, "connection limits"},
		{"negative header bytes", idemhttp.Config{MaxHeaderBytes: -1}, "connection limits"},
		{"a share above 1", idemhttp.Config{Health: idemhttp.HealthConfig{SuccessRate: 1.5}}, "SuccessRate"},
		{"a negative share", idemhttp.Config{Health: idemhttp.HealthConfig{HitRate: -0.1}}, "HitRate"},
		{"a negative threshold", idemhttp.Config{Health: idemhttp.HealthConfig{DeadJobs: -2}}, "negative"},
		{"a negative duration threshold", idemhttp.Config{Health: idemhttp.HealthConfig{RunningFor: -time.Second}}, "negative"},
		{"HealthZero thresholds", idemhttp.Config{Health: idemhttp.HealthConfig{DeadJobs: idemhttp.HealthZero,
			RunningFor: idemhttp.HealthZero, SuccessRate: idemhttp.HealthZero}}, ""},
		{"a CORS origin without a scheme", idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"example.com"}}}, "cors origin"},
		{"CORS for any origin", idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"*"}}}, ""},
		{"a CORS header with a space", idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedHeaders: []string{"x-client-info, apikey"}}}, "cors header"},
		{"an empty CORS header", idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedHeaders: []string{"Authorization", ""}}}, "cors header"},
		{"CORS headers of seed 004", idemhttp.Config{CORS: idemhttp.CORSConfig{AllowedOrigins: []string{"*"},
			AllowedHeaders: []string{"authorization", "x-client-info", "apikey", "content-type"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
			// NewServer refuses exactly what Validate refuses.
			st := openSQLite(t)
			client, err2 := idem.NewClient(st, &idem.Config{DisableMaintenance: true})
			if err2 != nil {
				t.Fatal(err2)
			}
			_, err2 = idemhttp.NewServer(client, st, &tc.cfg)
			if (err == nil) != (err2 == nil) {
				t.Fatalf("Validate says %v, NewServer says %v", err, err2)
			}
		})
	}
}

// TestSplitHandlers: the API handler serves no ops route and the ops
// handler no API route, so they can listen on separate addresses.
func TestSplitHandlers(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil)
	api := httptest.NewServer(e.server.APIHandler())
	t.Cleanup(api.Close)
	ops := httptest.NewServer(e.server.OpsHandler())
	t.Cleanup(ops.Close)
	get := func(base, path, key string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		base, path string
		want       int
	}{
		{api.URL, "/v1/stats", 200},
		{api.URL, "/healthz", 404},
		{api.URL, "/metrics", 404},
		{ops.URL, "/healthz", 200},
		{ops.URL, "/metrics", 200},
		{ops.URL, "/v1/stats", 404},
	} {
		if got := get(tc.base, tc.path, e.admin); got != tc.want {
			t.Errorf("%s on the %s handler: %d, want %d", tc.path, map[bool]string{true: "API", false: "ops"}[tc.base == api.URL], got, tc.want)
		}
	}
}

// TestLimitMetrics: /metrics shows each limit, its usage and its
// throttled claims, labelled by scope.
func TestLimitMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, openSQLite, nil) // the first /metrics reads the store afresh
	ctx := context.Background()
	if _, err := e.client.LimitPut(ctx, idem.Limit{FlowScope: idem.FlowScope{Queue: "mail"}, Rate: 100, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.LimitPut(ctx, idem.Limit{FlowScope: idem.FlowScope{Tenant: "a", Queue: "sms"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "sms"})
	}
	r := e.req("POST", "/v1/claim", e.keyA, map[string]any{"queues": []string{"sms"}, "worker_id": "w", "limit": 5})
	expect(t, r, 200, "")

	r = e.req("GET", "/metrics", "", nil)
	expect(t, r, 200, "")
	body := string(r.body)
	for _, want := range []string{
		`idem_limit{kind="rate",period_seconds="60",queue="mail",tenant=""} 100`,
		`idem_limit{kind="concurrency",period_seconds="",queue="sms",tenant="a"} 1`,
		`idem_limit_running{queue="sms",tenant="a"} 1`,
		`idem_limit_window_used{queue="mail",tenant=""} 0`,
		`idem_throttled_claims_total{queue="sms",tenant="a"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// A concurrency-only limit has no rate window series.
	if regexp.MustCompile(`idem_limit_window_used\{queue="sms"`).MatchString(body) {
		t.Error("a window series for a limit without a rate")
	}
}
