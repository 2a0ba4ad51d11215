package idem

import (
	"context"

	"github.com/idem-dev/idem/internal/maintenance"
)

// WaitFinishWritten returns a channel closed the next time a finish of job
// id (any state: completed, retryable, snoozed…) is written by c, and the
// function that stops waiting. Tests wait on it instead of polling.
func WaitFinishWritten(c *Client, id int64) (<-chan struct{}, func()) {
	return c.notifier.WaitFinished(id)
}

// RunSchedulerOnce runs one pass of c's scheduler (ungated by leadership,
// on c's clock): tests drive many schedulers at once with it.
func RunSchedulerOnce(c *Client) (int, error) {
	return c.newScheduler(&maintenance.Config{Now: c.cfg.Now, Logger: c.logger, ScheduleGrace: c.cfg.ScheduleGrace}).RunOnce(context.Background())
}

// CloseNATSConns closes c's NATS connections as nats.go does when it gives
// up reconnecting, leaving the targets built on them in place.
func CloseNATSConns(c *Client) {
	c.targets.mu.Lock()
	defer c.targets.mu.Unlock()
	for _, nc := range c.targets.nats {
		nc.Close()
	}
}

// FitKey is fitKey: the delivery job's partition or idempotency key.
func FitKey(k string) string { return fitKey(k) }

// ProducersStopped returns a channel closed once every producer of c (a
// started client) has stopped: Stop then waits for the running handlers.
func ProducersStopped(c *Client) <-chan struct{} {
	c.mu.Lock()
	rt := c.runtime
	c.mu.Unlock()
	out := make(chan struct{})
	go func() {
		for _, p := range rt.producers {
			<-p.Stopped()
		}
		close(out)
	}()
	return out
}

// WaitAnnounced returns a channel closed at the next job announced in one
// of queues to c (what a long-polling Claim waits for), and the function
// that stops waiting.
func WaitAnnounced(c *Client, queues []string) (<-chan struct{}, func()) {
	return c.notifier.WaitInserted(queues)
}

// OnKindsRead sets f to be called with each kind list a claim of a client
// on w reads, after the read and before the claim uses it (f may block
// there). Call it before the client starts.
func OnKindsRead(w *Workers, f func(kinds []string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kindsRead = f
}
