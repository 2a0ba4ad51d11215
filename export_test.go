package idem

// WaitFinishWritten returns a channel closed the next time a finish of job
// id (any state: completed, retryable, snoozed…) is written by c, and the
// function that stops waiting. Tests wait on it instead of polling.
func WaitFinishWritten(c *Client, id int64) (<-chan struct{}, func()) {
	return c.notifier.WaitFinished(id)
}
