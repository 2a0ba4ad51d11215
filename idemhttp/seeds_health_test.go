package idemhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
	"github.com/idem-dev/idem/internal/dbtest"
)

// The health thresholds of seeds 003 (queue health check) and 004 (job
// alerts) with the server's defaults, on both stores: each check takes the
// seed's number and compares as the seed does (more than, less than), so
// the seed's value itself is still healthy and one past it is not.

func TestSeedHealthDefaultsSQLite(t *testing.T) {
	t.Parallel()
	runSeedHealth(t, openSQLite)
}

func TestSeedHealthDefaultsPostgres(t *testing.T) {
	t.Parallel()
	dbtest.PostgresURL(t)
	runSeedHealth(t, openPostgres)
}

func runSeedHealth(t *testing.T, open opener) {
	tests := map[string]func(t *testing.T, open opener){
		"thresholds are the seeds' numbers":                 testSeedHealthThresholds,
		"003 more than 100 dead jobs is unhealthy":          testSeed003DeadJobs,
		"003 more than 1000 pending or 5 minutes old":       testSeed003Backlog,
		"003 success rate below 95 percent":                 testSeed003SuccessRate,
		"004 more than 5 failed jobs of a function in 24 h": testSeed004FailedPerKind,
		"004 retry rate above 10 percent":                   testSeed004RetryRate,
		"004 a job running for more than 30 minutes":        testSeed004RunningFor,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

// healthEnv is a server with the default health thresholds and a clock the
// test moves.
func healthEnv(t *testing.T, open opener) (*env, *shiftClock) {
	clock := &shiftClock{}
	return setup(t, open, &setupOpts{clientCfg: clock.clientCfg(), serverCfg: clock.serverCfg(idemhttp.HealthConfig{})}), clock
}

// seedJobs enqueues n jobs of kind in queue for tenant a, each allowed
// maxAttempts attempts.
func (e *env) seedJobs(kind, queue string, n, maxAttempts int) {
	e.t.Helper()
	for done := 0; done < n; {
		batch := make([]idem.EnqueueParams, min(n-done, 500))
		for i := range batch {
			batch[i] = idem.EnqueueParams{Kind: kind, Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, done+i)),
				Opts: &idem.EnqueueOpts{Tenant: "a", Queue: queue, MaxAttempts: maxAttempts}}
		}
		if _, err := e.client.EnqueueMany(context.Background(), batch); err != nil {
			e.t.Fatal(err)
		}
		done += len(batch)
	}
}

// claimN claims n jobs of queue for tenant a.
func (e *env) claimN(queue string, n int) []*idem.JobRow {
	e.t.Helper()
	var out []*idem.JobRow
	for len(out) < n {
		jobs, err := e.client.Claim(context.Background(), idem.ClaimParams{Tenant: "a", Queues: []string{queue},
			WorkerID: "w", Limit: min(n-len(out), 100), Lease: time.Hour})
		if err != nil || len(jobs) == 0 {
			e.t.Fatalf("claim: %d jobs (%v), %d to go", len(jobs), err, n-len(out))
		}
		out = append(out, jobs...)
	}
	return out
}

// finish completes (ok) or fails the claimed jobs; a failure is retried
// when the job has attempts left and retry is true, else dead.
func (e *env) finish(jobs []*idem.JobRow, ok, retry bool) {
	e.t.Helper()
	ctx := context.Background()
	for _, j := range jobs {
		var err error
		if ok {
			_, err = e.client.Complete(ctx, "a", j.ID, j.LeaseToken, nil)
		} else {
			_, err = e.client.Fail(ctx, "a", j.ID, j.LeaseToken, idem.FailParams{Error: "boom", NoRetry: !retry})
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

// checkOf returns the check name of an admin's GET /v1/health and the
// overall status.
func (e *env) checkOf(name string) (overall, status string, c map[string]any) {
	e.t.Helper()
	overall, checks := e.healthOf(e.admin)
	c, ok := checks[name].(map[string]any)
	if !ok {
		e.t.Fatalf("no check %s in %v", name, checks)
	}
	return overall, c["status"].(string), c
}

func testSeedHealthThresholds(t *testing.T, open opener) {
	e, _ := healthEnv(t, open)
	_, checks := e.healthOf(e.admin)
	for name, want := range map[string]float64{
		"dead_jobs":           100,  // 003: DLQ count > 100 unhealthy
		"available_jobs":      1000, // 003: pending count > 1000 degraded
		"oldest_available_s":  300,  // 003: oldest pending > 5 minutes degraded
		"success_rate_1m":     0.95, // 003: success rate < 95 % degraded
		"failed_per_kind_24h": 5,    // 004: failed jobs (24 h) > 5
		"longest_running_s":   1800, // 004: running and started before now - 30 min
		"retry_rate_24h":      0.10, // 004: retry rate > 10 %
	} {
		c, _ := checks[name].(map[string]any)
		if c["threshold"] != want || c["status"] != "healthy" {
			t.Errorf("check %s: %v, want threshold %v and healthy", name, c, want)
		}
	}
}

func testSeed003DeadJobs(t *testing.T, open opener) {
	e, _ := healthEnv(t, open)
	e.seedJobs("geo_event", "geo", 101, 1)
	jobs := e.claimN("geo", 101)
	e.finish(jobs[:100], false, false)
	if overall, status, c := e.checkOf("dead_jobs"); status != "healthy" || overall == "unhealthy" || c["value"] != float64(100) {
		t.Fatalf("100 dead jobs: %s (overall %s) %v, want healthy", status, overall, c)
	}
	e.finish(jobs[100:], false, false)
	if overall, status, c := e.checkOf("dead_jobs"); status != "unhealthy" || overall != "unhealthy" {
		t.Fatalf("101 dead jobs: %s (overall %s) %v, want unhealthy", status, overall, c)
	}
}

func testSeed003Backlog(t *testing.T, open opener) {
	e, clock := healthEnv(t, open)
	e.seedJobs("geo_event", "geo", 1000, 5)
	clock.shift(4*time.Minute + 50*time.Second)
	if _, status, c := e.checkOf("available_jobs"); status != "healthy" {
		t.Fatalf("1000 available: %s %v, want healthy", status, c)
	}
	if _, status, c := e.checkOf("oldest_available_s"); status != "healthy" {
		t.Fatalf("oldest available 4m50s: %s %v, want healthy", status, c)
	}
	e.seedJobs("geo_event", "geo", 1, 5)
	if overall, status, c := e.checkOf("available_jobs"); status != "degraded" || overall != "degraded" {
		t.Fatalf("1001 available: %s (overall %s) %v, want degraded", status, overall, c)
	}
	clock.shift(5*time.Minute + 10*time.Second)
	if _, status, c := e.checkOf("oldest_available_s"); status != "degraded" {
		t.Fatalf("oldest available 5m10s: %s %v, want degraded", status, c)
	}
}

func testSeed003SuccessRate(t *testing.T, open opener) {
	e, _ := healthEnv(t, open)
	e.seedJobs("geo_event", "geo", 21, 1)
	jobs := e.claimN("geo", 21)
	e.finish(jobs[:19], true, false)
	e.finish(jobs[19:20], false, false)
	if _, status, c := e.checkOf("success_rate_1m"); status != "healthy" || c["value"] != 0.95 {
		t.Fatalf("19 of 20 delivered: %s %v, want 0.95 healthy", status, c)
	}
	e.finish(jobs[20:], false, false)
	if overall, status, c := e.checkOf("success_rate_1m"); status != "degraded" || overall == "healthy" {
		t.Fatalf("19 of 21 delivered: %s (overall %s) %v, want degraded", status, overall, c)
	}
}

func testSeed004FailedPerKind(t *testing.T, open opener) {
	e, clock := healthEnv(t, open)
	// Failures older than 24 h are not counted.
	e.seedJobs("detect-alerts", "cron", 6, 1)
	e.finish(e.claimN("cron", 6), false, false)
	if _, status, _ := e.checkOf("failed_per_kind_24h"); status != "degraded" {
		t.Fatalf("6 failed detect-alerts runs: %s, want degraded", status)
	}
	clock.shift(25 * time.Hour)
	if _, status, c := e.checkOf("failed_per_kind_24h"); status != "healthy" {
		t.Fatalf("6 failures 25 h ago: %s %v, want healthy", status, c)
	}
	// Five failures each of two functions: no function has more than 5,
	// whether its runs await a retry (failed, retried later) or are dead.
	e.seedJobs("detect-alerts", "cron", 5, 3)
	e.finish(e.claimN("cron", 5), false, true)
	e.seedJobs("sync-bigquery", "cron", 5, 1)
	e.finish(e.claimN("cron", 5), false, false)
	if _, status, c := e.checkOf("failed_per_kind_24h"); status != "healthy" || c["value"] != float64(5) {
		t.Fatalf("5 failed runs of each function: %s %v, want healthy", status, c)
	}
	e.seedJobs("detect-alerts", "cron", 1, 1)
	e.finish(e.claimN("cron", 1), false, false)
	_, status, c := e.checkOf("failed_per_kind_24h")
	if detail, _ := c["detail"].(string); status != "degraded" || !strings.Contains(detail, "detect-alerts") {
		t.Fatalf("6 failed detect-alerts runs: %s %v, want degraded naming detect-alerts", status, c)
	}
}

func testSeed004RetryRate(t *testing.T, open opener) {
	e, _ := healthEnv(t, open)
	e.seedJobs("generate-decision-cards", "cron", 20, 3)
	jobs := e.claimN("cron", 20)
	e.finish(jobs[:18], true, false)
	e.finish(jobs[18:], false, true)
	if _, status, c := e.checkOf("retry_rate_24h"); status != "healthy" || c["value"] != 0.1 {
		t.Fatalf("2 of 20 runs retried: %s %v, want 0.1 healthy", status, c)
	}
	e.seedJobs("generate-decision-cards", "cron", 1, 3)
	jobs = e.claimN("cron", 1)
	e.finish(jobs, false, true)
	if overall, status, c := e.checkOf("retry_rate_24h"); status != "degraded" || overall == "healthy" {
		t.Fatalf("3 of 21 runs retried: %s (overall %s) %v, want degraded", status, overall, c)
	}
}

func testSeed004RunningFor(t *testing.T, open opener) {
	e, clock := healthEnv(t, open)
	e.seedJobs("auto-measure-outcomes", "cron", 1, 1)
	e.claimN("cron", 1)
	clock.shift(29 * time.Minute)
	if _, status, c := e.checkOf("longest_running_s"); status != "healthy" {
		t.Fatalf("running 29 min: %s %v, want healthy", status, c)
	}
	clock.shift(31 * time.Minute)
	if overall, status, c := e.checkOf("longest_running_s"); status != "degraded" || overall != "degraded" {
		t.Fatalf("running 31 min: %s (overall %s) %v, want degraded", status, overall, c)
	}
}
