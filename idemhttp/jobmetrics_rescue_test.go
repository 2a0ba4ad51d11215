package idemhttp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp"
)

// signalRescue forwards every event to JobMetrics and signals rescues
// once the metrics have seen them.
type signalRescue struct {
	*idemhttp.JobMetrics
	rescued chan struct{}
}

func (o *signalRescue) ObserveJob(e *idem.JobEvent) {
	o.JobMetrics.ObserveJob(e)
	if e.Type == idem.EventRescued {
		o.rescued <- struct{}{}
	}
}

// TestJobMetricsRescuedToDead: a pull worker that vanishes on a job's last
// attempt leaves it to the rescuer, which moves it to the dead-letter
// queue: idem_jobs_dead_total ("jobs moved to the dead-letter queue")
// counts it, besides idem_jobs_rescued_total.
func TestJobMetricsRescuedToDead(t *testing.T) {
	t.Parallel()
	var clock shiftClock
	obs := &signalRescue{JobMetrics: idemhttp.NewJobMetrics(0), rescued: make(chan struct{}, 4)}
	e := setup(t, openSQLite, &setupOpts{start: true,
		clientCfg: &idem.Config{Now: clock.now, Observer: obs, RescueInterval: 20 * time.Millisecond}})
	if err := e.server.Registry().Register(obs.JobMetrics); err != nil {
		t.Fatal(err)
	}
	e.enqueue(e.keyA, map[string]any{"kind": "k", "queue": "rq", "max_attempts": 1})
	e.claim(e.keyA, "rq")  // the worker never answers
	clock.shift(time.Hour) // its lease is long expired
	select {
	case <-obs.rescued:
	case <-time.After(10 * time.Second): // the rescuer runs every 20 ms
		t.Fatal("no rescue")
	}
	body := string(e.req("GET", "/metrics", "", nil).body)
	for _, want := range []string{
		`idem_jobs_rescued_total{kind="k",queue="rq"} 1`,
		`idem_jobs_dead_total{kind="k",queue="rq"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Fatalf("metrics lack %s:\n%s", want, grepLines(body, `queue="rq"`))
		}
	}
}
