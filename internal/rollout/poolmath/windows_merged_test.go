package poolmath

import (
	"fmt"
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The interval a gate reports is the union of every window's openings
// that overlap or touch, the same at every look inside it (and before
// it): its start does not move while it is open.
func TestAMergedWindowKeepsItsStartAtEveryLook(t *testing.T) {
	utc := func(d, h, min int) time.Time { return time.Date(2026, 12, d, h, min, 0, 0, time.UTC) }
	var never time.Time // zero: no bound within the look-back or look-ahead
	chained := []nodepoolv1.MaintenanceWindow{win("0 8 * * *", time.Hour, "UTC"), win("0 9 * * *", 2*time.Hour, "UTC")}
	for _, tc := range []struct {
		name  string
		m     nodepoolv1.Maintenance
		looks []look
	}{
		{name: "chained windows 08:00-09:00 and 09:00-11:00 are one interval",
			m: nodepoolv1.Maintenance{Windows: chained}, looks: []look{
				{now: utc(1, 7, 0), start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 8, 0), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 8, 30), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 9, 0), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 9, 30), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 10, 59), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 11, 0), start: utc(2, 8, 0), end: utc(2, 11, 0)},
			}},
		{name: "windows of two zones chain too (09:00 Berlin is 08:00Z in December)",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 9 * * *", time.Hour, "Europe/Berlin"), win("0 9 * * *", 2*time.Hour, "UTC")}},
			looks: []look{
				{now: utc(1, 8, 30), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
				{now: utc(1, 10, 30), open: true, start: utc(1, 8, 0), end: utc(1, 11, 0)},
			}},
		{name: "a daily 48h window is always open and reports no new start each day",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 8 * * *", 48*time.Hour, "UTC")}},
			looks: []look{
				{now: utc(1, 7, 0), open: true, start: never, end: never},
				{now: utc(1, 9, 0), open: true, start: never, end: never},
				{now: utc(2, 9, 0), open: true, start: never, end: never},
				{now: utc(3, 23, 0), open: true, start: never, end: never},
			}},
		{name: "an interval longer than the reach: no end from its start, no start once it is older than the reach",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 0 1 * *", 10*24*time.Hour, "UTC")}},
			looks: []look{
				{now: utc(1, 0, 0), open: true, start: utc(1, 0, 0), end: never},
				{now: utc(8, 23, 0), open: true, start: utc(1, 0, 0), end: never},
				{now: utc(10, 0, 0), open: true, start: never, end: utc(11, 0, 0)},
			}},
		{name: "an exclusion cuts the merged interval and it reopens after it",
			m: nodepoolv1.Maintenance{Windows: chained, Exclusions: []nodepoolv1.MaintenanceExclusion{
				excl("db-migration", utc(1, 9, 15), utc(1, 9, 45), nodepoolv1.ExclusionScopePlatform, false)}},
			looks: []look{
				{now: utc(1, 7, 0), start: utc(1, 8, 0), end: utc(1, 9, 15)},
				{now: utc(1, 8, 30), open: true, start: utc(1, 8, 0), end: utc(1, 9, 15)},
				{now: utc(1, 9, 30), exclusion: "db-migration", start: utc(1, 9, 45), end: utc(1, 11, 0)},
				{now: utc(1, 10, 0), open: true, start: utc(1, 9, 45), end: utc(1, 11, 0)},
			}},
		{name: "an exclusion cuts a window that is always open",
			m: nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("0 * * * *", time.Hour, "Europe/Berlin")}, Exclusions: []nodepoolv1.MaintenanceExclusion{
				excl("freeze", utc(10, 0, 0), utc(12, 0, 0), nodepoolv1.ExclusionScopeAll, false)}},
			looks: []look{
				{now: utc(5, 0, 0), open: true, start: never, end: utc(10, 0, 0)},
				{now: utc(9, 23, 0), open: true, start: never, end: utc(10, 0, 0)},
				{now: utc(11, 0, 0), exclusion: "freeze", start: utc(12, 0, 0), end: never},
				{now: utc(13, 0, 0), open: true, start: utc(12, 0, 0), end: never},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkLooks(t, tc.m, tc.looks) })
	}
}

// tenHourlyWindows are always open: each alone, and merged.
func tenHourlyWindows() nodepoolv1.Maintenance {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Sydney"}
	var m nodepoolv1.Maintenance
	for i := range 10 {
		m.Windows = append(m.Windows, win(fmt.Sprintf("%d * * * *", 6*i), time.Hour, zones[i%len(zones)]))
	}
	return m
}

func BenchmarkWindowState(b *testing.B) {
	m := tenHourlyWindows()
	now := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	for b.Loop() {
		c := NewCalendar(&m)
		// As a decision does: the platform gate, an owner and a restart
		// gate, the deadline's.
		c.GateAt(now, ClassPlatform, false)
		c.GateAt(now, ClassOwner, false)
		c.GateAt(now, ClassRestart, false)
		NewCalendar(&m).GateAt(now, ClassPlatform, false)
	}
}

// A window opening every few seconds is always open, and found so within
// bounded work.
func TestAWindowOpeningEverySecondsIsAlwaysOpen(t *testing.T) {
	checkLooks(t, nodepoolv1.Maintenance{Windows: []nodepoolv1.MaintenanceWindow{win("@every 5s", time.Minute, "UTC")}},
		[]look{{now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), open: true}})
}
