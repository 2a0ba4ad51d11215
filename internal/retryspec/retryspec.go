// Package retryspec turns the API's retry object (wire.RetrySpec: the
// "retry" of an enqueue, a batch job, a completion job or a schedule, and
// the CLI's --retry flag) into an idem.RetryPolicy. It is the one parser of
// that object, so the server and the CLI cannot disagree on what it means.
package retryspec

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/idemhttp/wire"
	"github.com/idem-dev/idem/idemtype"
)

// MaxDelays is the longest explicit retry schedule accepted.
const MaxDelays = 100

// MaxFactor is the largest growth factor accepted.
const MaxFactor = 100

// Parse validates r (not nil) and returns its policy and its max_attempts
// (0 = not given). An error is an *idemtype.InvalidError naming the field
// (retry.base, retry.delays[2], …). A spec with no backoff field (only
// max_attempts) is no policy (nil): the job backs off by its queue's or
// kind's, as without "retry", not by idem's built-in defaults. A field not
// written takes idem's default, so a max below the base — either written
// or its default (base 5 s, max 1 h) — is refused, never silently capped.
func Parse(r *wire.RetrySpec) (*idem.RetryPolicy, int, error) {
	attempts := 0
	if r.MaxAttempts != nil {
		if *r.MaxAttempts < 1 || *r.MaxAttempts > idem.MaxMaxAttempts {
			return nil, 0, idemtype.Invalid("retry.max_attempts", "must be between 1 and %d", idem.MaxMaxAttempts)
		}
		attempts = *r.MaxAttempts
	}
	if r.Base == nil && r.Factor == nil && r.Max == nil && r.Jitter == nil && len(r.Delays) == 0 {
		return nil, attempts, nil
	}
	pol := &idem.RetryPolicy{}
	base, err := Duration("retry.base", r.Base)
	if err != nil {
		return nil, 0, err
	}
	if base != nil {
		if *base == 0 {
			return nil, 0, idemtype.Invalid("retry.base", "must be positive")
		}
		pol.Base = *base
	}
	mx, err := Duration("retry.max", r.Max)
	if err != nil {
		return nil, 0, err
	}
	if mx != nil {
		if *mx == 0 {
			return nil, 0, idemtype.Invalid("retry.max", "must be positive")
		}
		pol.Max = *mx
	}
	if r.Factor != nil {
		if f := *r.Factor; math.IsNaN(f) || f < 1 || f > MaxFactor {
			return nil, 0, idemtype.Invalid("retry.factor", "must be between 1 and %d", MaxFactor)
		}
		pol.Factor = *r.Factor
	}
	if r.Jitter != nil {
		j := *r.Jitter
		if math.IsNaN(j) || j < 0 || j > 1 {
			return nil, 0, idemtype.Invalid("retry.jitter", "must be between 0 and 1")
		}
		pol.Jitter = j
		if j == 0 {
			pol.Jitter = -1 // none
		}
	}
	if len(r.Delays) > 0 {
		if r.Base != nil || r.Factor != nil {
			return nil, 0, idemtype.Invalid("retry.delays", "not with retry.base or retry.factor: an explicit schedule replaces them")
		}
		if len(r.Delays) > MaxDelays {
			return nil, 0, idemtype.Invalid("retry.delays", "at most %d delays", MaxDelays)
		}
		for i := range r.Delays {
			d, err := Duration(fmt.Sprintf("retry.delays[%d]", i), &r.Delays[i])
			if err != nil {
				return nil, 0, err
			}
			pol.Delays = append(pol.Delays, *d)
		}
		return pol, attempts, nil
	}
	if err := checkCap(pol, base != nil, mx != nil); err != nil {
		return nil, 0, err
	}
	return pol, attempts, nil
}

// checkCap refuses a max below the base, each written or its default.
func checkCap(pol *idem.RetryPolicy, baseSet, maxSet bool) error {
	base, mx := idem.DefaultRetryBase, idem.DefaultRetryMax
	if baseSet {
		base = pol.Base
	}
	if maxSet {
		mx = pol.Max
	}
	if mx >= base {
		return nil
	}
	switch {
	case !maxSet:
		return idemtype.Invalid("retry.max", "must not be below retry.base %s: not given, it is the default %s; give a max of at least the base", base, mx)
	case !baseSet:
		return idemtype.Invalid("retry.max", "must not be below retry.base: not given, the base is the default %s; give a base of at most %s", base, mx)
	}
	return idemtype.Invalid("retry.max", "must not be below retry.base")
}

// Duration parses an optional duration of field (nil when s is nil): Go
// syntax ("30s", "1h30m") or integer seconds ("30"), not negative.
func Duration(field string, s *string) (*time.Duration, error) {
	if s == nil {
		return nil, nil
	}
	d, err := time.ParseDuration(*s)
	if n, nerr := strconv.ParseInt(*s, 10, 64); nerr == nil {
		if n < 0 {
			// Before multiplying: a large negative count wraps around.
			return nil, idemtype.Invalid(field, "must not be negative")
		}
		if n <= math.MaxInt64/int64(time.Second) {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil {
		return nil, idemtype.Invalid(field, "%q is not a duration such as \"30s\", \"168h\" or \"30\" (seconds)", *s)
	}
	if d < 0 {
		return nil, idemtype.Invalid(field, "must not be negative")
	}
	return &d, nil
}
