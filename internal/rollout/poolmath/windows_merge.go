package poolmath

import "time"

// reach is how far the merged interval of the windows is followed: back
// from the look for its start, on from its start (or the look, when it
// has none) for its end. An interval open longer reports no start or no
// end: a window that is always open (a weekly one that lasts a week, a
// daily one of 48h) has neither, at every look. A week and a day, so a
// weekly window that touches its next opening is found always open.
const reach = 8 * 24 * time.Hour

// maxSteps bounds the openings followed each way: a window opening every
// few seconds ("@every 5s") is taken as open beyond the reach when it
// has more.
const maxSteps = 50000

type found struct {
	iv Interval
	ok bool
}

// windowFrom is the merged window interval that contains t or, if none
// does, the next one (ok false when none opens within the horizon):
// every opening of every window that overlaps or touches another is in
// it, so it is the same at every look from before it opens to its end.
func (c *Calendar) windowFrom(t time.Time) (Interval, bool) {
	key := t.UnixNano()
	if f, ok := c.found[key]; ok {
		return f.iv, f.ok
	}
	iv, ok := c.merge(t)
	if c.found == nil {
		c.found = map[int64]found{}
	}
	c.found[key] = found{iv: iv, ok: ok}
	return iv, ok
}

func (c *Calendar) merge(t time.Time) (Interval, bool) {
	// The earliest opening whose end is after t.
	var first Interval
	ok := false
	for i := range c.windows {
		w := &c.windows[i]
		s := w.next(t.Add(-w.duration))
		if s.IsZero() || s.Sub(t) > horizon {
			continue
		}
		if !ok || s.Before(first.Start) {
			first, ok = Interval{Start: s, End: s.Add(w.duration)}, true
		}
	}
	if !ok {
		return Interval{}, false
	}
	start := c.openedAt(first.Start, t)
	anchor := start // the end is followed from the start, so it is the same at every look
	if anchor.IsZero() {
		anchor = t
	}
	return Interval{Start: start, End: c.closesAt(first, anchor)}, true
}

// openedAt is where the openings chained before the one at x begin: an
// opening that overlaps or touches x from before it moves x back to its
// start (zero once that is more than reach before t).
func (c *Calendar) openedAt(x, t time.Time) time.Time {
	for range maxSteps {
		if t.Sub(x) > reach {
			return time.Time{}
		}
		moved := false
		for i := range c.windows {
			w := &c.windows[i]
			// The first opening at or after x - duration: its end is at
			// or after x.
			if s := w.next(x.Add(-w.duration - time.Nanosecond)); !s.IsZero() && s.Before(x) {
				x, moved = s, true
			}
		}
		if !moved {
			return x
		}
	}
	return time.Time{}
}

// closesAt is the end of the openings chained from first: every window's
// openings in order, each starting before (or as) the interval so far
// ends extends it. Zero once it runs more than reach past anchor.
func (c *Calendar) closesAt(first Interval, anchor time.Time) time.Time {
	end := first.End
	next := make([]opening, len(c.windows))
	for i := range c.windows {
		w := &c.windows[i]
		next[i] = w.after(first.Start.Add(-w.duration))
	}
	for range maxSteps {
		k := -1
		for i, o := range next {
			if !o.at.IsZero() && (k < 0 || o.at.Before(next[k].at)) {
				k = i
			}
		}
		if k < 0 || next[k].at.After(end) {
			return end
		}
		w := &c.windows[k]
		if e := next[k].at.Add(w.duration); e.After(end) {
			end = e
		}
		if end.Sub(anchor) > reach {
			return time.Time{}
		}
		next[k] = w.following(next[k])
	}
	return time.Time{}
}
