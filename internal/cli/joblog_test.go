package cli

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

func TestJobLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := jobLogger{slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	base := idem.JobEvent{JobID: 7, Kind: "flaky", Queue: "q", Attempt: 2}
	cases := []struct {
		name  string
		edit  func(e *idem.JobEvent)
		level string
		msg   string
	}{
		{"retry at warn", func(e *idem.JobEvent) {
			e.Type, e.State, e.Outcome, e.Err = idem.EventFinished, idemtype.StateRetryable, idemtype.OutcomeFailed, "boom"
		}, "WARN", "job attempt failed; will retry"},
		{"dead at error", func(e *idem.JobEvent) {
			e.Type, e.State, e.Outcome = idem.EventFinished, idemtype.StateDead, idemtype.OutcomeDead
		}, "ERROR", "job dead"},
		{"panic at error", func(e *idem.JobEvent) {
			e.Type, e.State, e.Outcome, e.Panicked = idem.EventFinished, idemtype.StateRetryable, idemtype.OutcomeFailed, true
		}, "ERROR", "job handler panicked"},
	}
	for _, c := range cases {
		buf.Reset()
		e := base
		c.edit(&e)
		l.ObserveJob(&e)
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%s: %q", c.name, buf.String())
		}
		if line["level"] != c.level || line["msg"] != c.msg || line["job_id"] != float64(7) || line["kind"] != "flaky" || line["attempt"] != float64(2) {
			t.Fatalf("%s: %v", c.name, line)
		}
	}
	// A completed job is not logged here; nor is a duplicate enqueue: the
	// client logs that itself, with its key (one line, not two).
	for _, e := range []*idem.JobEvent{{Type: idem.EventFinished, State: idemtype.StateCompleted, Outcome: idemtype.OutcomeCompleted},
		{Type: idem.EventDeduplicated}} {
		buf.Reset()
		l.ObserveJob(e)
		if strings.TrimSpace(buf.String()) != "" {
			t.Fatalf("%s logged: %s", e.Type, buf.String())
		}
	}
}

// maintSpy records the maintenance runs it is told of.
type maintSpy struct{ runs []string }

func (*maintSpy) ObserveJob(*idem.JobEvent) {}
func (s *maintSpy) ObserveMaintenance(e *idem.MaintenanceEvent) {
	s.runs = append(s.runs, e.Service)
}

// TestObserversFanOutMaintenance: idem serve's observers pass maintenance
// runs on to those that take them (the Prometheus metrics), skipping the
// others.
func TestObserversFanOutMaintenance(t *testing.T) {
	t.Parallel()
	spy := &maintSpy{}
	var obs idem.Observer = observers{jobLogger{slog.New(slog.DiscardHandler)}, spy}
	mo, ok := obs.(idem.MaintenanceObserver)
	if !ok {
		t.Fatal("observers is not an idem.MaintenanceObserver")
	}
	mo.ObserveMaintenance(&idem.MaintenanceEvent{Service: "retention", Rows: 3})
	if len(spy.runs) != 1 || spy.runs[0] != "retention" {
		t.Fatalf("runs seen: %v", spy.runs)
	}
}
