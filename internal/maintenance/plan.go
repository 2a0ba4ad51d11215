package maintenance

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // zones resolve on hosts without a zoneinfo database

	"github.com/robfig/cron/v3"

	"github.com/idem-dev/idem/idemtype"
	"github.com/idem-dev/idem/key"
)

// Missed-firing policies: what happens to firings that fell due while no
// scheduler ran (every node down, or a clock stepped forward).
const (
	// MissedSkip drops missed firings: a firing older than the grace is
	// not run; the schedule continues with its next firing.
	MissedSkip = "skip"
	// MissedCatchUp runs one job for the newest missed firing, however
	// old, then continues on schedule.
	MissedCatchUp = "catch_up"
)

// MinEvery is the shortest interval: firings are keyed at least by the minute.
const MinEvery = time.Minute

// cronParser accepts 5 fields, or 6 with leading seconds, and descriptors
// (@daily, @every 5m is refused: use Every).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Timing is when a schedule fires: a cron expression or a fixed interval,
// in a zone, keyed at a grain.
type Timing struct {
	Cron string // 5 fields, or 6 with seconds first; "" when Every is set
	// Every is a fixed interval, 0 when Cron is set. Firings fall on
	// multiples of it since time.Time's zero (Truncate), the same on every
	// node: on the UTC clock for an interval that divides a day (every 5m
	// fires at :00, :05, …); not the Unix epoch, which differs for others.
	Every    time.Duration
	Timezone string    // IANA zone; "" = UTC
	Grain    key.Grain // the grain of the firing keys; "" = minute
	Missed   string    // MissedSkip (default) or MissedCatchUp
}

// Plan is a validated Timing, ready to compute firings and their keys.
type Plan struct {
	cron   cron.Schedule // nil for an interval
	every  time.Duration
	loc    *time.Location
	grain  key.Grain
	missed string
}

// Compile validates t (CheckGrain is the costly rest of the validation,
// for new schedules only). Its errors are *idemtype.InvalidError naming the field
// at fault: cron, every, timezone, grain or missed.
func Compile(t Timing) (*Plan, error) {
	p := &Plan{every: t.Every, grain: t.Grain, missed: t.Missed}
	if p.grain == "" {
		p.grain = key.GrainMinute
	}
	if _, err := key.ParseGrain(string(p.grain)); err != nil {
		return nil, idemtype.Invalid("grain", "want minute, hour or day")
	}
	switch p.missed {
	case "":
		p.missed = MissedSkip
	case MissedSkip, MissedCatchUp:
	default:
		return nil, idemtype.Invalid("missed", "%q: want %s or %s", t.Missed, MissedSkip, MissedCatchUp)
	}
	loc, err := time.LoadLocation(t.Timezone)
	if err != nil || strings.EqualFold(t.Timezone, "local") {
		return nil, idemtype.Invalid("timezone", "%q is not an IANA time zone", t.Timezone)
	}
	p.loc = loc
	switch {
	case t.Cron != "" && t.Every != 0:
		return nil, idemtype.Invalid("cron", "give cron or every, not both")
	case t.Cron != "":
		if strings.Contains(t.Cron, "TZ=") || strings.HasPrefix(strings.TrimSpace(t.Cron), "@every") {
			return nil, idemtype.Invalid("cron", "%q: the zone goes in timezone and intervals in every", t.Cron)
		}
		if p.cron, err = cronParser.Parse(t.Cron); err != nil {
			return nil, idemtype.Invalid("cron", "%q: %v", t.Cron, err)
		}
	case t.Every < 0 || t.Every > 0 && t.Every < MinEvery || t.Every%time.Second != 0:
		return nil, idemtype.Invalid("every", "must be whole seconds and at least %v", MinEvery)
	case t.Every == 0:
		return nil, idemtype.Invalid("cron", "give cron or every")
	}
	return p, nil
}

// Missed returns the missed-firing policy.
func (p *Plan) Missed() string { return p.missed }

// Location returns the zone of the schedule.
func (p *Plan) Location() *time.Location { return p.loc }

// Next returns the first firing strictly after t (zero when there is none:
// a cron expression that never matches again).
//
// A cron expression is searched one stretch of the zone's UTC offset at a
// time, in a fixed zone of that offset, never across a change:
// robfig/cron's own search across a change that is not a whole hour away
// from where it lands (Lord Howe's 30 minutes, Chatham's change at :45)
// skipped days, fired at times the expression does not name, and could
// return t itself (a scheduler stuck on that firing for good). So a firing
// is an instant whose wall-clock time the expression names: a time a
// change skips has none, a repeated one has two.
func (p *Plan) Next(t time.Time) time.Time {
	if p.cron == nil {
		return t.Truncate(p.every).Add(p.every).UTC()
	}
	from, stretch := t, t
	for range maxOffsetStretches {
		l := stretch.In(p.loc)
		name, offset := l.Zone()
		end := zoneEnd(stretch, p.loc)
		n := p.cron.Next(from.In(time.FixedZone(name, offset)))
		if n.IsZero() || end.IsZero() || n.Before(end) {
			return n.UTC()
		}
		// Not in this stretch: the first firing at or after its end.
		from, stretch = end.Add(-time.Nanosecond), end
	}
	return time.Time{}
}

// zoneEnd returns the end of the stretch of t's UTC offset in loc: the
// first instant after t with another offset, or a later one with the same
// offset (ZoneBounds may cut a stretch at a year's end); zero when the
// offset never changes after t. Go's ZoneBounds (1.26) gives, for the last
// day of a leap year past a zone's explicit transitions (its offset then
// follows the rule of its TZ string: 31 December 2040 in Europe/Berlin,
// 2044, …), a stretch that ends at that day's 00:00 UTC, at or before t:
// the stretch is then looked up again an hour on, up to two days (no zone
// changes its offset twice in that time).
func zoneEnd(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	_, end := l.ZoneBounds()
	if end.IsZero() || end.After(t) {
		return end
	}
	_, offset := l.Zone()
	for p := t.Add(time.Hour); p.Sub(t) <= 48*time.Hour; p = p.Add(time.Hour) {
		pl := p.In(loc)
		start, end := pl.ZoneBounds()
		if _, o := pl.Zone(); o != offset {
			if start.After(t) && !start.After(p) {
				return start
			}
			return p // a change within the hour before p
		}
		if end.IsZero() || end.After(p) {
			return end
		}
	}
	return t.Add(48 * time.Hour) // the same offset all along
}

// maxOffsetStretches bounds the stretches of one UTC offset that Next
// looks through: robfig/cron looks five years ahead, and no zone changes
// its offset more than a few times a year.
const maxOffsetStretches = 100

// Key returns the firing key of the firing at f: key.Lock(name, tenant, f,
// zone, grain) — "{schedule}:{tenant}:{grain date in the zone}".
func (p *Plan) Key(name, tenant string, f time.Time) (string, error) {
	k, err := key.Lock(name, tenant, f, p.loc, p.grain, nil)
	if err != nil {
		return "", fmt.Errorf("firing key: %w", err)
	}
	return k, nil
}

// Repeat returns the later instant at which the wall-clock time of the
// firing f comes again in the zone (the repeated hour of a daylight-saving
// change), zero when it does not. Both instants have one firing key.
func (p *Plan) Repeat(f time.Time) time.Time {
	l := f.In(p.loc)
	end := zoneEnd(f, p.loc)
	if end.IsZero() {
		return time.Time{}
	}
	_, before := l.Zone()
	_, after := end.In(p.loc).Zone()
	back := time.Duration(before-after) * time.Second
	if back <= 0 || f.Add(back).Before(end) {
		return time.Time{}
	}
	return f.Add(back).UTC()
}

// grainLength is the shortest span of one grain date.
func grainLength(g key.Grain) time.Duration {
	switch g {
	case key.GrainHour:
		return time.Hour
	case key.GrainDay:
		return 23 * time.Hour // a day that loses an hour to daylight saving
	}
	return time.Minute
}

// CheckGrain refuses a schedule two consecutive firings of which can fall
// in one grain date (one key, so one job): every 5 s at minute grain,
// hourly at day grain, "0 0,23 * * *" at day grain, every 24 h at day grain
// in a zone whose 25-hour day puts two firings on one date. The one
// exception is a daylight-saving repeat of one wall-clock time (the
// repeated autumn hour), deduplicated on purpose: one job per local time.
//
// Cron schedules are sampled over their next 200 firings. An interval
// schedule must be at least its grain long, and is checked at each change
// of its zone's UTC offset from 2026 to 2035: only the two firings around
// such a change can share a grain date (between changes, firings at least
// a grain apart never do).
func (p *Plan) CheckGrain() error {
	if p.cron == nil {
		if p.every < grainLength(p.grain) || p.grain == key.GrainDay && p.every < 24*time.Hour {
			return idemtype.Invalid("grain", "every %v fires more than once per %s", p.every, p.grain)
		}
		end := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
		for t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); t.Before(end); {
			change := zoneEnd(t, p.loc)
			if change.IsZero() || !change.After(t) {
				return nil // a fixed offset: no more changes
			}
			f := change.Add(-time.Nanosecond).Truncate(p.every) // the last firing before the change
			if date, same := p.sameGrain(f, f.Add(p.every)); same {
				return idemtype.Invalid("grain", "every %v fires twice on %s in %s (a daylight-saving change)",
					p.every, date, p.loc)
			}
			t = change
		}
		return nil
	}
	f := p.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for range 200 {
		n := p.Next(f)
		if n.IsZero() {
			return nil
		}
		if date, same := p.sameGrain(f, n); same {
			return idemtype.Invalid("grain", "the cron expression fires more than once per %s (%s)", p.grain, date)
		}
		f = n
	}
	return nil
}

// sameGrain reports whether the firings f and n share a grain date in the
// zone other than as a daylight-saving repeat of one wall-clock time.
func (p *Plan) sameGrain(f, n time.Time) (string, bool) {
	a, _ := key.Grain.Format(p.grain, f, p.loc)
	b, _ := key.Grain.Format(p.grain, n, p.loc)
	const wall = "15:04:05.999999999"
	return b, a == b && f.In(p.loc).Format(wall) != n.In(p.loc).Format(wall)
}
