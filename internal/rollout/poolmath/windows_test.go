package poolmath

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func win(schedule string, d time.Duration, tz string) nodepoolv1.MaintenanceWindow {
	return nodepoolv1.MaintenanceWindow{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

func excl(name string, start, end time.Time, scope nodepoolv1.ExclusionScope, unbreakable bool) nodepoolv1.MaintenanceExclusion {
	return nodepoolv1.MaintenanceExclusion{Name: name, Start: metav1.NewTime(start), End: metav1.NewTime(end), Scope: scope, Unbreakable: unbreakable}
}

func TestGateAt(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	kiritimati := zone(t, "Pacific/Kiritimati")
	pago := zone(t, "Pacific/Pago_Pago")
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	in := func(loc *time.Location, y int, m time.Month, d, h, min int) time.Time {
		return time.Date(y, m, d, h, min, 0, 0, loc)
	}
	saturdays := win("0 2 * * 6", 4*time.Hour, "Europe/Berlin")
	freeze := excl("year-end-freeze", utc(2026, 12, 18, 0, 0), utc(2027, 1, 6, 0, 0), nodepoolv1.ExclusionScopeAll, false)
	for _, tc := range []struct {
		name      string
		m         nodepoolv1.Maintenance
		now       time.Time
		class     Class
		emergency bool
		open      bool
		start     time.Time // of the allowed interval
		end       time.Time
		exclusion string
		invalid   bool
	}{
		{name: "inside a window", m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}},
			now: in(berlin, 2026, 12, 5, 3, 0), class: ClassPlatform, open: true,
			start: in(berlin, 2026, 12, 5, 2, 0), end: in(berlin, 2026, 12, 5, 6, 0)},
		{name: "before a window: the next Saturday 02:00 Berlin", m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}},
			now: utc(2026, 12, 1, 12, 0), class: ClassPlatform,
			start: in(berlin, 2026, 12, 5, 2, 0), end: in(berlin, 2026, 12, 5, 6, 0)},
		{name: "the window closes at its end", m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}},
			now: in(berlin, 2026, 12, 5, 6, 0), class: ClassPlatform,
			start: in(berlin, 2026, 12, 12, 2, 0), end: in(berlin, 2026, 12, 12, 6, 0)},
		{name: "owner changes are not gated by default", m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}},
			now: utc(2026, 12, 1, 12, 0), class: ClassOwner, open: true},
		{name: "owner changes gated when opted in", m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}, Gate: []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutOwner}},
			now: utc(2026, 12, 1, 12, 0), class: ClassOwner,
			start: in(berlin, 2026, 12, 5, 2, 0), end: in(berlin, 2026, 12, 5, 6, 0)},
		{name: "restarts gated when opted in", m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}, Gate: []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart}},
			now: utc(2026, 12, 1, 12, 0), class: ClassRestart,
			start: in(berlin, 2026, 12, 5, 2, 0), end: in(berlin, 2026, 12, 5, 6, 0)},

		// Daylight saving: 2026-03-29 clocks skip 02:00–03:00 in Berlin,
		// 2026-10-25 they repeat it.
		{name: "a window at 02:30 on the night clocks skip 02:00-03:00 opens when they have",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("30 2 * * *", time.Hour, "Europe/Berlin")}},
			now: utc(2026, 3, 28, 12, 0), class: ClassPlatform,
			start: in(berlin, 2026, 3, 29, 3, 0), end: in(berlin, 2026, 3, 29, 4, 0)},
		{name: "the night after the skip is the usual 02:30",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("30 2 * * *", time.Hour, "Europe/Berlin")}},
			now: in(berlin, 2026, 3, 29, 4, 0), class: ClassPlatform,
			start: in(berlin, 2026, 3, 30, 2, 30), end: in(berlin, 2026, 3, 30, 3, 30)},
		{name: "a window at 02:30 on the night 02:00-03:00 repeats opens once, the first time",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("30 2 * * *", 30*time.Minute, "Europe/Berlin")}},
			now: utc(2026, 10, 24, 12, 0), class: ClassPlatform,
			start: utc(2026, 10, 25, 0, 30), end: utc(2026, 10, 25, 1, 0)},
		{name: "it does not open again the second time 02:30 comes",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("30 2 * * *", 30*time.Minute, "Europe/Berlin")}},
			now: utc(2026, 10, 25, 1, 10), class: ClassPlatform,
			start: in(berlin, 2026, 10, 26, 2, 30), end: in(berlin, 2026, 10, 26, 3, 0)},
		{name: "a duration is elapsed time across the repeated hour",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 1 * * *", 4*time.Hour, "Europe/Berlin")}},
			now: utc(2026, 10, 24, 12, 0), class: ClassPlatform,
			start: in(berlin, 2026, 10, 25, 1, 0), end: in(berlin, 2026, 10, 25, 4, 0)},

		// Zones far from UTC: the window is on the local calendar day.
		{name: "Pacific/Kiritimati (+14): Saturday 02:00 local is Friday 12:00 UTC",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 2 * * 6", time.Hour, "Pacific/Kiritimati")}},
			now: utc(2026, 12, 1, 0, 0), class: ClassPlatform,
			start: in(kiritimati, 2026, 12, 5, 2, 0), end: utc(2026, 12, 4, 13, 0)},
		{name: "Pacific/Pago_Pago (-11): Saturday 02:00 local is Saturday 13:00 UTC",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 2 * * 6", time.Hour, "Pacific/Pago_Pago")}},
			now: utc(2026, 12, 5, 12, 0), class: ClassPlatform,
			start: in(pago, 2026, 12, 5, 2, 0), end: utc(2026, 12, 5, 14, 0)},

		{name: "a window shorter than a reconcile interval is found between reconciles",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("15 3 * * *", time.Minute, "")}},
			now: utc(2026, 12, 1, 3, 14), class: ClassPlatform,
			start: utc(2026, 12, 1, 3, 15), end: utc(2026, 12, 1, 3, 16)},
		{name: "overlapping windows merge into one interval",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{
				win("0 1 * * *", 2*time.Hour, ""), win("0 2 * * *", 3*time.Hour, ""), win("0 5 * * *", time.Hour, "")}},
			now: utc(2026, 12, 1, 1, 30), class: ClassPlatform, open: true,
			start: utc(2026, 12, 1, 1, 0), end: utc(2026, 12, 1, 6, 0)},
		{name: "a window that is always open has no start or end (not the minute before the look)",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("* * * * *", 2*time.Minute, "")}},
			now: utc(2026, 12, 1, 1, 30), class: ClassPlatform, open: true},

		{name: "an exclusion that ended opened the interval",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 0 * * *", 6*time.Hour, "")},
				Exclusions: []nodepoolv1.MaintenanceExclusion{excl("db-migration", utc(2026, 12, 1, 1, 0), utc(2026, 12, 1, 2, 0), nodepoolv1.ExclusionScopePlatform, false)}},
			now: utc(2026, 12, 1, 3, 0), class: ClassPlatform, open: true,
			start: utc(2026, 12, 1, 2, 0), end: utc(2026, 12, 1, 6, 0)},
		{name: "an exclusion inside a window holds it and the window reopens after it",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 0 * * *", 6*time.Hour, "")},
				Exclusions: []nodepoolv1.MaintenanceExclusion{excl("db-migration", utc(2026, 12, 1, 1, 0), utc(2026, 12, 1, 2, 0), nodepoolv1.ExclusionScopePlatform, false)}},
			now: utc(2026, 12, 1, 1, 30), class: ClassPlatform, exclusion: "db-migration",
			start: utc(2026, 12, 1, 2, 0), end: utc(2026, 12, 1, 6, 0)},
		{name: "a window is cut short where an exclusion starts",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 0 * * *", 6*time.Hour, "")},
				Exclusions: []nodepoolv1.MaintenanceExclusion{excl("db-migration", utc(2026, 12, 1, 4, 0), utc(2026, 12, 1, 5, 0), nodepoolv1.ExclusionScopePlatform, false)}},
			now: utc(2026, 12, 1, 1, 0), class: ClassPlatform, open: true,
			start: utc(2026, 12, 1, 0, 0), end: utc(2026, 12, 1, 4, 0)},
		{name: "the year-end freeze holds every Saturday in it",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}, Exclusions: []nodepoolv1.MaintenanceExclusion{freeze}},
			now: in(berlin, 2026, 12, 19, 3, 0), class: ClassPlatform, exclusion: "year-end-freeze",
			start: in(berlin, 2027, 1, 9, 2, 0), end: in(berlin, 2027, 1, 9, 6, 0)},
		{name: "an exclusion of scope All holds an owner change that is not gated",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}, Exclusions: []nodepoolv1.MaintenanceExclusion{freeze}},
			now: utc(2026, 12, 20, 0, 0), class: ClassOwner, exclusion: "year-end-freeze", start: utc(2027, 1, 6, 0, 0)},
		{name: "an exclusion of scope Platform lets an owner change through",
			m: nodepoolv1.Maintenance{Exclusions: []nodepoolv1.MaintenanceExclusion{
				excl("platform-freeze", utc(2026, 12, 18, 0, 0), utc(2027, 1, 6, 0, 0), nodepoolv1.ExclusionScopePlatform, false)}},
			now: utc(2026, 12, 20, 0, 0), class: ClassOwner, open: true},
		{name: "the emergency path ignores windows and breakable exclusions",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays}, Exclusions: []nodepoolv1.MaintenanceExclusion{freeze}},
			now: utc(2026, 12, 20, 0, 0), class: ClassPlatform, emergency: true, open: true},
		{name: "an unbreakable exclusion holds the emergency path",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{saturdays},
				Exclusions: []nodepoolv1.MaintenanceExclusion{excl("black-friday", utc(2026, 11, 27, 0, 0), utc(2026, 11, 30, 0, 0), nodepoolv1.ExclusionScopeAll, true)}},
			now: utc(2026, 11, 28, 0, 0), class: ClassPlatform, emergency: true, exclusion: "black-friday", start: utc(2026, 11, 30, 0, 0)},
		{name: "overlapping exclusions: the window after both",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 * * * *", 30*time.Minute, "")}, Exclusions: []nodepoolv1.MaintenanceExclusion{
				excl("a", utc(2026, 12, 1, 0, 0), utc(2026, 12, 1, 3, 10), nodepoolv1.ExclusionScopeAll, false),
				excl("b", utc(2026, 12, 1, 3, 0), utc(2026, 12, 1, 5, 40), nodepoolv1.ExclusionScopeAll, false)}},
			now: utc(2026, 12, 1, 1, 0), class: ClassPlatform, exclusion: "a",
			start: utc(2026, 12, 1, 6, 0), end: utc(2026, 12, 1, 6, 30)},
		{name: "an unknown time zone holds gated rollouts",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 2 * * 6", time.Hour, "Europe/Atlantis")}},
			now: utc(2026, 12, 1, 0, 0), class: ClassPlatform, invalid: true},
		{name: "an unparsable schedule holds gated rollouts",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 25 * * 6", time.Hour, "")}},
			now: utc(2026, 12, 1, 0, 0), class: ClassPlatform, invalid: true},
		{name: "an unparsable schedule does not hold an owner change that is not gated",
			m:   nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 25 * * 6", time.Hour, "")}},
			now: utc(2026, 12, 1, 0, 0), class: ClassOwner, open: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			g := NewCalendar(&m).GateAt(tc.now, tc.class, tc.emergency)
			if g.Invalid != tc.invalid {
				t.Fatalf("invalid = %v, want %v (%+v)", g.Invalid, tc.invalid, g)
			}
			if tc.invalid {
				return
			}
			if g.Open != tc.open || g.Exclusion != tc.exclusion || !g.Found {
				t.Errorf("open %v exclusion %q found %v, want open %v exclusion %q", g.Open, g.Exclusion, g.Found, tc.open, tc.exclusion)
			}
			if !g.Allowed.Start.Equal(tc.start) || !g.Allowed.End.Equal(tc.end) {
				t.Errorf("allowed %s – %s, want %s – %s", g.Allowed.Start.UTC(), g.Allowed.End.UTC(), tc.start.UTC(), tc.end.UTC())
			}
		})
	}
}

func TestNoWindowWithinTheHorizon(t *testing.T) {
	// February 30th never comes.
	m := nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 2 30 2 *", time.Hour, "")}}
	g := NewCalendar(&m).GateAt(now, ClassPlatform, false)
	if g.Open || g.Found {
		t.Errorf("a window that never opens: %+v", g)
	}
}
