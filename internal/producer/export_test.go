package producer

import (
	"context"

	"github.com/idem-dev/idem/idemtype"
)

// SetKeptHook makes p call f with each job whose outcome it keeps, just
// before the finish goes to the completer; call it before Start. Tests
// use it to run a shutdown step at that exact point.
func SetKeptHook(p *Producer, f func(row *idemtype.JobRow)) { p.kept = f }

// AddRunning registers row as running in r with cancel (Running.add).
func AddRunning(r *Running, row *idemtype.JobRow, cancel context.CancelCauseFunc) { r.add(row, cancel) }
