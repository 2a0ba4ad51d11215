package idemclient

import "time"

// BackoffBounds returns the backoff bounds the client settled on.
func BackoffBounds(cl *Client) (minBackoff, maxBackoff time.Duration) {
	return cl.cfg.MinBackoff, cl.cfg.MaxBackoff
}
