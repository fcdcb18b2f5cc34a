package poolmath

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// starBit is how cron marks a field written "*" (its day-of-month and
// day-of-week then combine with and, not or).
const starBit = 1 << 63

// nextSlot is the schedule's first time strictly after wt, a wall clock
// written as UTC (zero when none within five years). For the schedules
// the parser makes from five fields it is the one cron.SpecSchedule.Next
// returns, found by bit arithmetic instead of stepping a minute and a
// second at a time, since the window search asks it for every opening it
// merges. A schedule with its own CRON_TZ is left to cron.
func nextSlot(s cron.Schedule, wt time.Time) time.Time {
	spec, ok := s.(*cron.SpecSchedule)
	if !ok || spec.Location != time.Local || wt.Location() != time.UTC {
		return s.Next(wt)
	}
	t := wt.Truncate(time.Second).Add(time.Second)
	y, mo, d := t.Date()
	h, mi, se := t.Clock()
	limit := y + 5
	nextMonth := func() {
		if mo++; mo > time.December {
			mo, y = time.January, y+1
		}
		d, h, mi, se = 1, 0, 0, 0
	}
	nextDay := func() {
		d, h, mi, se = d+1, 0, 0, 0
	}
	for y <= limit {
		if spec.Month&(1<<uint(mo)) == 0 {
			nextMonth()
			continue
		}
		if d > daysIn(mo, y) {
			nextMonth()
			continue
		}
		if !daysMatch(spec, d, weekday(y, mo, d)) {
			nextDay()
			continue
		}
		hh := nextBit(spec.Hour, h, 23)
		if hh < 0 {
			nextDay()
			continue
		}
		if hh != h {
			h, mi, se = hh, 0, 0
		}
		mm := nextBit(spec.Minute, mi, 59)
		if mm < 0 {
			if h, mi, se = h+1, 0, 0; h > 23 {
				nextDay()
			}
			continue
		}
		if mm != mi {
			mi, se = mm, 0
		}
		ss := nextBit(spec.Second, se, 59)
		if ss < 0 {
			if mi, se = mi+1, 0; mi > 59 {
				if h, mi = h+1, 0; h > 23 {
					nextDay()
				}
			}
			continue
		}
		return time.Date(y, mo, d, h, mi, ss, 0, time.UTC)
	}
	return time.Time{}
}

// nextBit is the lowest set bit of mask from from to top (-1: none).
func nextBit(mask uint64, from, top int) int {
	if from > top {
		return -1
	}
	m := mask &^ (1<<uint(from) - 1) & (1<<uint(top+1) - 1)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}

// daysMatch is cron's rule for a day: day of month and day of week both
// match when either is "*", one of them does otherwise.
func daysMatch(s *cron.SpecSchedule, dom int, dow time.Weekday) bool {
	domMatch := s.Dom&(1<<uint(dom)) != 0
	dowMatch := s.Dow&(1<<uint(dow)) != 0
	if s.Dom&starBit != 0 || s.Dow&starBit != 0 {
		return domMatch && dowMatch
	}
	return domMatch || dowMatch
}

func daysIn(m time.Month, y int) int {
	if m == time.February && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 29
	}
	return monthDays[m]
}

var monthDays = [...]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// weekday of a date of the proleptic Gregorian calendar (Sakamoto's
// method).
func weekday(y int, m time.Month, d int) time.Weekday {
	offsets := [...]int{0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4}
	if m < time.March {
		y--
	}
	return time.Weekday((y + y/4 - y/100 + y/400 + offsets[m-1] + d) % 7)
}
