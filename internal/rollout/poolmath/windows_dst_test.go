package poolmath

import (
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// look is one look at a calendar: the gate at now, and the interval it
// reports.
type look struct {
	now        time.Time
	open       bool
	start, end time.Time
	// exclusion holding it now, if any.
	exclusion string
}

func checkLooks(t *testing.T, m nodepoolv1.Maintenance, looks []look) {
	t.Helper()
	for _, l := range looks {
		g := NewCalendar(&m).GateAt(l.now, ClassPlatform, false)
		if !g.Found || g.Open != l.open || !g.Allowed.Start.Equal(l.start) || !g.Allowed.End.Equal(l.end) || g.Exclusion != l.exclusion {
			t.Errorf("at %s: found %v open %v exclusion %q, allowed %s – %s; want open %v exclusion %q, %s – %s", l.now.UTC().Format(time.RFC3339),
				g.Found, g.Open, g.Exclusion, g.Allowed.Start.UTC(), g.Allowed.End.UTC(), l.open, l.exclusion, l.start.UTC(), l.end.UTC())
		}
	}
}

// A sub-hourly window is found at every look around both daylight saving
// changes of both zones: a wall clock repeated on the fall-back night
// opens the window once (the first time), one the spring-forward night
// skips opens it when the clocks have jumped.
func TestDaylightSavingNeverLosesAWindow(t *testing.T) {
	utc := func(m time.Month, d, h, min int) time.Time { return time.Date(2026, m, d, h, min, 0, 0, time.UTC) }
	every10 := func(tz string) nodepoolv1.Maintenance {
		return nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("*/10 * * * *", 5*time.Minute, tz)}}
	}
	for _, tc := range []struct {
		name  string
		zone  string
		looks []look
	}{
		// 2026-10-25 01:00Z Berlin goes from 03:00 CEST back to 02:00 CET.
		{name: "Europe/Berlin falls back", zone: "Europe/Berlin", looks: []look{
			{now: utc(10, 25, 0, 47), start: utc(10, 25, 0, 50), end: utc(10, 25, 0, 55)},
			{now: utc(10, 25, 0, 52), open: true, start: utc(10, 25, 0, 50), end: utc(10, 25, 0, 55)},
			{now: utc(10, 25, 0, 57), start: utc(10, 25, 2, 0), end: utc(10, 25, 2, 5)},
			{now: utc(10, 25, 1, 0), start: utc(10, 25, 2, 0), end: utc(10, 25, 2, 5)},
			{now: utc(10, 25, 1, 20), start: utc(10, 25, 2, 0), end: utc(10, 25, 2, 5)}, // the second 02:20
			{now: utc(10, 25, 1, 52), start: utc(10, 25, 2, 0), end: utc(10, 25, 2, 5)},
			{now: utc(10, 25, 2, 2), open: true, start: utc(10, 25, 2, 0), end: utc(10, 25, 2, 5)},
			{now: utc(10, 25, 2, 7), start: utc(10, 25, 2, 10), end: utc(10, 25, 2, 15)},
		}},
		// 2026-11-01 06:00Z New York goes from 02:00 EDT back to 01:00 EST.
		{name: "America/New_York falls back", zone: "America/New_York", looks: []look{
			{now: utc(11, 1, 5, 52), open: true, start: utc(11, 1, 5, 50), end: utc(11, 1, 5, 55)},
			{now: utc(11, 1, 5, 57), start: utc(11, 1, 7, 0), end: utc(11, 1, 7, 5)},
			{now: utc(11, 1, 6, 20), start: utc(11, 1, 7, 0), end: utc(11, 1, 7, 5)}, // the second 01:20
			{now: utc(11, 1, 6, 59), start: utc(11, 1, 7, 0), end: utc(11, 1, 7, 5)},
			{now: utc(11, 1, 7, 3), open: true, start: utc(11, 1, 7, 0), end: utc(11, 1, 7, 5)},
		}},
		// 2026-03-29 01:00Z Berlin goes from 02:00 CET on to 03:00 CEST:
		// 02:00 to 02:50 and 03:00 all open at 01:00Z.
		{name: "Europe/Berlin springs forward", zone: "Europe/Berlin", looks: []look{
			{now: utc(3, 29, 0, 52), open: true, start: utc(3, 29, 0, 50), end: utc(3, 29, 0, 55)},
			{now: utc(3, 29, 0, 57), start: utc(3, 29, 1, 0), end: utc(3, 29, 1, 5)},
			{now: utc(3, 29, 1, 2), open: true, start: utc(3, 29, 1, 0), end: utc(3, 29, 1, 5)},
			{now: utc(3, 29, 1, 7), start: utc(3, 29, 1, 10), end: utc(3, 29, 1, 15)},
		}},
		// 2026-03-08 07:00Z New York goes from 02:00 EST on to 03:00 EDT.
		{name: "America/New_York springs forward", zone: "America/New_York", looks: []look{
			{now: utc(3, 8, 6, 52), open: true, start: utc(3, 8, 6, 50), end: utc(3, 8, 6, 55)},
			{now: utc(3, 8, 6, 57), start: utc(3, 8, 7, 0), end: utc(3, 8, 7, 5)},
			{now: utc(3, 8, 7, 4), open: true, start: utc(3, 8, 7, 0), end: utc(3, 8, 7, 5)},
			{now: utc(3, 8, 7, 5), start: utc(3, 8, 7, 10), end: utc(3, 8, 7, 15)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLooks(t, every10(tc.zone), tc.looks) })
	}
}

// Minute by minute through both nights of both zones, every look finds a
// window: the one open now, the same at every look, or one that opens
// within two hours.
func TestEveryLookAroundDaylightSavingFindsAWindow(t *testing.T) {
	for _, tz := range []string{"Europe/Berlin", "America/New_York"} {
		m := nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("*/10 * * * *", 5*time.Minute, tz)}}
		for _, day := range []time.Time{time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 4, 0, 0, 0, time.UTC),
			time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC)} {
			var prev Gate
			for now := day; now.Before(day.Add(4 * time.Hour)); now = now.Add(time.Minute) {
				g := NewCalendar(&m).GateAt(now, ClassPlatform, false)
				if prev.Open && g.Open && (!prev.Allowed.Start.Equal(g.Allowed.Start) || !prev.Allowed.End.Equal(g.Allowed.End)) {
					t.Fatalf("%s at %s: the open window moved from %v to %v", tz, now.Format(time.RFC3339), prev.Allowed, g.Allowed)
				}
				prev = g
				switch {
				case !g.Found:
					t.Fatalf("%s at %s: no window found", tz, now.Format(time.RFC3339))
				case g.Open != g.Allowed.Contains(now):
					t.Fatalf("%s at %s: open %v but allowed %s – %s", tz, now.Format(time.RFC3339), g.Open, g.Allowed.Start, g.Allowed.End)
				case !g.Open && (!g.Allowed.Start.After(now) || g.Allowed.Start.Sub(now) > 2*time.Hour):
					t.Fatalf("%s at %s: next window at %s", tz, now.Format(time.RFC3339), g.Allowed.Start)
				}
			}
		}
	}
}
