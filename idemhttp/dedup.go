package idemhttp

import (
	"time"

	"github.com/idem-dev/idem"
)

// parseDedupWindow parses dedup_window: a duration as parseDuration, or
// "forever" (idem.DedupForever).
func parseDedupWindow(s *string) (*time.Duration, error) {
	if s != nil && *s == idem.DedupForeverName {
		d := idem.DedupForever
		return &d, nil
	}
	return parseDuration("dedup_window", s)
}
