package poolmath

import (
	"time"

	"github.com/robfig/cron/v3"
)

// A window's schedule is evaluated on the wall clock of its time zone:
// this file turns instants into wall clocks and back, across daylight
// saving changes.

type window struct {
	schedule cron.Schedule
	duration time.Duration
	loc      *time.Location
	// period is the zone period (constant UTC offset) of the instant
	// converted last: most conversions fall in it and need no zone
	// lookup.
	period zonePeriod
}

// zonePeriod is [start, end) at one UTC offset (zero start or end: no
// transition that way).
type zonePeriod struct {
	start, end time.Time
	offset     time.Duration
	ok         bool
}

// settled is how long after a zone period starts its wall clocks are
// sure not to repeat those of the period before (clocks never go back by
// more than a day).
const settled = 26 * time.Hour

// inside reports whether t is in p, far enough from its start that the
// wall clock of t occurs only once.
func (p zonePeriod) inside(t time.Time) bool {
	return p.ok && (p.start.IsZero() || !t.Before(p.start.Add(settled))) && (p.end.IsZero() || t.Before(p.end))
}

func (w *window) remember(t time.Time) {
	l := t.In(w.loc)
	_, off := l.Zone()
	start, end := l.ZoneBounds()
	w.period = zonePeriod{start: start, end: end, offset: time.Duration(off) * time.Second, ok: true}
}

// wall is t's wall clock in loc, as a UTC time: the schedule is evaluated
// on wall clocks, so a daylight saving change neither skips nor repeats a
// window.
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// instant is the first instant whose wall clock in loc is w; a wall clock
// that does not exist (clocks went forward over it) is the instant they
// did.
func instant(w time.Time, loc *time.Location) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	if !wall(t, loc).Equal(w) {
		// In a gap: the transition is the start of t's zone period, or
		// the end of the one before.
		start, end := t.ZoneBounds()
		if wall(start, loc).After(w) {
			return start
		}
		return end
	}
	// Clocks that went back repeat wall clocks: take the earlier instant.
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if e := t.Add(-back); wall(e, loc).Equal(w) {
			return e
		}
	}
	return t
}

// instant is the first instant of wall clock wn in the window's zone.
func (w *window) instant(wn time.Time) time.Time {
	if at := wn.Add(-w.period.offset).In(time.UTC); w.period.inside(at) {
		return at
	}
	at := instant(wn, w.loc)
	w.remember(at)
	return at
}

// searchFrom is the wall clock from which the schedule is read for the
// openings after t. Right after clocks went back, t's wall clock repeats
// ones that came before, and the openings at those wall clocks were the
// first time (before t): the search starts where the repeated wall clocks
// end.
func (w *window) searchFrom(t time.Time) time.Time {
	if w.period.inside(t) {
		return t.Add(w.period.offset).In(time.UTC)
	}
	w.remember(t)
	wt := wall(t, w.loc)
	if start := w.period.start; !start.IsZero() {
		if before := wall(start.Add(-time.Nanosecond), w.loc); before.After(wt) {
			wt = before
		}
	}
	return wt
}

// opening is one opening of a window: its wall clock and its instant.
type opening struct {
	wall, at time.Time
}

// after is the first opening of w strictly after t (zero when none within
// the horizon).
func (w *window) after(t time.Time) opening {
	wt := w.searchFrom(t)
	for range 4 {
		wn := nextSlot(w.schedule, wt)
		if wn.IsZero() {
			return opening{}
		}
		if at := w.instant(wn); at.After(t) {
			return opening{wall: wn, at: at}
		}
		wt = wn // the first of two repeated wall clocks was before t
	}
	return opening{}
}

// next is the first opening of w strictly after t (zero when none within
// the horizon).
func (w *window) next(t time.Time) time.Time { return w.after(t).at }

// following is the opening after o (zero when none within five years of
// it): wall clocks in order, so a repeated one opens once.
func (w *window) following(o opening) opening {
	wn := nextSlot(w.schedule, o.wall)
	if wn.IsZero() {
		return opening{}
	}
	return opening{wall: wn, at: w.instant(wn)}
}
