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
		{"duplicate at debug", func(e *idem.JobEvent) { e.Type = idem.EventDeduplicated }, "DEBUG", "duplicate enqueue answered by the existing job"},
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
	buf.Reset()
	l.ObserveJob(&idem.JobEvent{Type: idem.EventFinished, State: idemtype.StateCompleted, Outcome: idemtype.OutcomeCompleted})
	if strings.TrimSpace(buf.String()) != "" {
		t.Fatalf("a completed job logged: %s", buf.String())
	}
}
