package idem

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Defaults of RetryPolicy: 5 s doubling with ±10 % jitter, capped at one hour
// (seed 003's 5 s…80 s over five attempts; seed 002's 60 s, 120 s, 240 s …
// 1 h is Base 60 s; seed 004's 1 s → 5 s → 25 s is Base 1 s, Factor 5).
const (
	DefaultRetryBase   = 5 * time.Second
	DefaultRetryFactor = 2.0
	DefaultRetryMax    = time.Hour
	DefaultRetryJitter = 0.1
)

// RetryPolicy computes the delay before a failed job's next attempt:
// Base·Factor^(attempt-1), capped at Max, with ±Jitter fraction of random
// jitter — or Delays[attempt-1] when Delays is set (the last entry repeats).
type RetryPolicy struct {
	Base   time.Duration   // first delay; default DefaultRetryBase
	Factor float64         // growth per attempt, at least 1; 0 = DefaultRetryFactor
	Max    time.Duration   // cap; default DefaultRetryMax; not below Base (each set or its default) without Delays
	Jitter float64         // 0..1, fraction of the delay; default DefaultRetryJitter; negative = none
	Delays []time.Duration // explicit schedule, overrides Base/Factor
}

// withDefaults fills zero fields.
func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Base <= 0 {
		p.Base = DefaultRetryBase
	}
	if p.Factor < 1 {
		p.Factor = DefaultRetryFactor
	}
	if p.Max <= 0 {
		p.Max = DefaultRetryMax
	}
	if p.Jitter == 0 {
		p.Jitter = DefaultRetryJitter
	}
	return p
}

// validate refuses what Delay cannot compute or the stored form (JSON)
// cannot hold: negative durations or factor, a factor between 0 and 1
// (which would shrink the delays; 0 is the default), a jitter above 1, a
// factor or jitter that is NaN or infinite, and (without Delays) a Max
// below the Base, each written or its default: the cap would hide the base.
func (p RetryPolicy) validate() error {
	if !isFinite(p.Factor) || !isFinite(p.Jitter) {
		return fmt.Errorf("retry factor and jitter must be finite numbers")
	}
	if p.Base < 0 || p.Max < 0 || p.Factor < 0 {
		return fmt.Errorf("retry base, max and factor must not be negative")
	}
	if p.Factor > 0 && p.Factor < 1 {
		return fmt.Errorf("retry factor %v below 1 (0 = the default, %v)", p.Factor, DefaultRetryFactor)
	}
	if p.Jitter > 1 {
		return fmt.Errorf("retry jitter %v above 1", p.Jitter)
	}
	for _, d := range p.Delays {
		if d < 0 {
			return fmt.Errorf("negative retry delay %s", d)
		}
	}
	if base, mx, capped := p.capsBase(); capped {
		return fmt.Errorf("retry max %s is below retry base %s (a field not set takes its default, base %s, max %s): set a max of at least the base",
			mx, base, DefaultRetryBase, DefaultRetryMax)
	}
	return nil
}

// capsBase reports whether the policy's cap is below its base (each set
// or its default), so every delay would be the cap; never with Delays.
func (p RetryPolicy) capsBase() (base, mx time.Duration, capped bool) {
	if len(p.Delays) > 0 {
		return 0, 0, false
	}
	d := p.withDefaults()
	return d.Base, d.Max, d.Max < d.Base
}

// isFinite reports whether f is neither NaN nor infinite.
func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Delay returns the wait after the given failed attempt (1-based); rnd is a
// uniform random number in [0,1) for the jitter.
func (p RetryPolicy) Delay(attempt int, rnd float64) time.Duration {
	p = p.withDefaults()
	attempt = max(attempt, 1)
	var d float64
	if len(p.Delays) > 0 {
		d = float64(p.Delays[min(attempt, len(p.Delays))-1])
	} else {
		d = float64(p.Base) * math.Pow(p.Factor, float64(attempt-1))
		d = math.Min(d, float64(p.Max))
	}
	if p.Jitter > 0 {
		d += d * p.Jitter * (2*rnd - 1)
	}
	if len(p.Delays) == 0 {
		d = math.Min(d, float64(p.Max))
	}
	if d >= float64(math.MaxInt64) {
		// float64 → int64 overflows (to a negative duration) from 2^63 on.
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(max(d, 0))
}

// retryPolicyJSON is the stored form of a job's own RetryPolicy.
type retryPolicyJSON struct {
	Base   string   `json:"base,omitempty"`
	Factor float64  `json:"factor,omitempty"`
	Max    string   `json:"max,omitempty"`
	Jitter float64  `json:"jitter,omitempty"`
	Delays []string `json:"delays,omitempty"`
}

// MarshalJSON encodes durations as Go duration strings ("5s").
func (p RetryPolicy) MarshalJSON() ([]byte, error) {
	j := retryPolicyJSON{Factor: p.Factor, Jitter: p.Jitter}
	if p.Base != 0 {
		j.Base = p.Base.String()
	}
	if p.Max != 0 {
		j.Max = p.Max.String()
	}
	for _, d := range p.Delays {
		j.Delays = append(j.Delays, d.String())
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes the form MarshalJSON writes. A policy stored before
// a max below the base was refused (validate) decodes with its base lowered
// to the cap: the same delays, all at the cap, so a stored schedule keeps
// firing and a stored job can be replayed.
func (p *RetryPolicy) UnmarshalJSON(b []byte) error {
	var j retryPolicyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	parse := func(s string) (time.Duration, error) {
		if s == "" {
			return 0, nil
		}
		return time.ParseDuration(s)
	}
	var err error
	out := RetryPolicy{Factor: j.Factor, Jitter: j.Jitter}
	if out.Base, err = parse(j.Base); err != nil {
		return fmt.Errorf("retry base: %w", err)
	}
	if out.Max, err = parse(j.Max); err != nil {
		return fmt.Errorf("retry max: %w", err)
	}
	for _, s := range j.Delays {
		d, err := parse(s)
		if err != nil {
			return fmt.Errorf("retry delay: %w", err)
		}
		out.Delays = append(out.Delays, d)
	}
	if _, mx, capped := out.capsBase(); capped {
		out.Base = mx
	}
	*p = out
	return nil
}
