package cli

import (
	"context"
	"log/slog"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemtype"
)

// jobLogger is an idem.Observer that logs what an operator must see: failed
// attempts at warn, dead jobs and panics at error, each with job id, kind,
// queue and attempt. Duplicate enqueues and result cache hits and misses
// are logged at debug by the client itself, with their idempotency key.
type jobLogger struct{ logger *slog.Logger }

// ObserveJob implements idem.Observer.
func (l jobLogger) ObserveJob(e *idem.JobEvent) {
	attrs := []slog.Attr{slog.Int64("job_id", e.JobID), slog.String("kind", e.Kind), slog.String("queue", e.Queue),
		slog.Int("attempt", e.Attempt)}
	ctx := context.Background()
	switch {
	case e.Type != idem.EventFinished:
	case e.Panicked:
		l.logger.LogAttrs(ctx, slog.LevelError, "job handler panicked", append(attrs, slog.String("state", string(e.State)),
			slog.String("err", e.Err))...)
	case e.State == idemtype.StateDead:
		l.logger.LogAttrs(ctx, slog.LevelError, "job dead", append(attrs, slog.String("err", e.Err))...)
	case e.Outcome == idemtype.OutcomeFailed:
		l.logger.LogAttrs(ctx, slog.LevelWarn, "job attempt failed; will retry", append(attrs, slog.String("err", e.Err))...)
	}
}

// observers fans job events out to several observers, and maintenance
// runs to those that are idem.MaintenanceObservers.
type observers []idem.Observer

// ObserveJob implements idem.Observer.
func (o observers) ObserveJob(e *idem.JobEvent) {
	for _, x := range o {
		x.ObserveJob(e)
	}
}

// ObserveMaintenance implements idem.MaintenanceObserver.
func (o observers) ObserveMaintenance(e *idem.MaintenanceEvent) {
	for _, x := range o {
		if mo, ok := x.(idem.MaintenanceObserver); ok {
			mo.ObserveMaintenance(e)
		}
	}
}
