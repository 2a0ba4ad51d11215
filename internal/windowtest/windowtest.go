// Package windowtest picks rate-limit periods for tests that must not see a
// rate window end while they run. idem's rate windows are fixed and aligned
// to the Unix epoch (store.Limit.WindowAt), so a test using "1/1h" fails when
// a whole hour passes between its claims; with a period from Period it does
// not, whatever the time of day.
package windowtest

import "time"

// Period returns the shortest whole number of minutes, at least least,
// whose window containing now has at least room left.
func Period(now time.Time, least, room time.Duration) time.Duration {
	p := least.Truncate(time.Minute)
	if p < time.Minute {
		p = time.Minute
	}
	for End(now, p).Sub(now) < room {
		p += time.Minute
	}
	return p
}

// End returns the end of the window of period p containing now.
func End(now time.Time, p time.Duration) time.Time {
	us, pu := now.UnixMicro(), p.Microseconds()
	return time.UnixMicro(us - ((us%pu)+pu)%pu + pu).UTC()
}
