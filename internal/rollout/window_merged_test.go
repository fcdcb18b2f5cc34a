package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

func windows(ws ...nodepoolv1.MaintenanceWindow) *nodepoolv1.Maintenance {
	return &nodepoolv1.Maintenance{Windows: ws}
}

func window(schedule string, d time.Duration, tz string) nodepoolv1.MaintenanceWindow {
	return nodepoolv1.MaintenanceWindow{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: tz}
}

// decideAt decides for a settled pool with the maintenance settings m at
// now.
func decideAt(t *testing.T, m *nodepoolv1.Maintenance, now time.Time, setup func(in *Input, w *inputstest.World)) Plan {
	t.Helper()
	w := inputstest.New()
	w.Pool.Spec.Management.Maintenance = m
	in := settled(t, w)
	in.Pool.Spec.Management.Maintenance = m.DeepCopy()
	if setup != nil {
		setup(&in, w)
	}
	in.Now = now
	return Decide(in)
}

// Chained windows 08:00-09:00 and 09:00-11:00 are one interval in
// status.maintenance.nextWindow, the same at 08:30 and at 09:30, and the
// controller looks again when it closes.
func TestTheNextWindowStaysPutWhileItIsOpen(t *testing.T) {
	m := windows(window("0 8 * * *", time.Hour, "UTC"), window("0 9 * * *", 2*time.Hour, "UTC"))
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{8*time.Hour + 30*time.Minute, 9*time.Hour + 30*time.Minute} {
		now := day.Add(at)
		p := decideAt(t, m, now, nil)
		st := p.Maintenance
		if st == nil || st.NextWindow == nil || !st.NextWindow.Start.Time.Equal(day.Add(8*time.Hour)) ||
			st.NextWindow.End == nil || !st.NextWindow.End.Time.Equal(day.Add(11*time.Hour)) {
			t.Errorf("at %s: status.maintenance %+v, want next window 08:00-11:00", now.Format(time.RFC3339), st)
		}
		if want := day.Add(11*time.Hour).Sub(now) + time.Second; p.RequeueAfter != want {
			t.Errorf("at %s: requeue after %v, want at the window's end (%v)", now.Format(time.RFC3339), p.RequeueAfter, want)
		}
	}
}

// The drift deadline's request keys on the opening of the window it is
// applied in: the merged one, so it is the same at every look.
func TestTheDeadlineRequestIsTheSameAtEveryLookInAMergedWindow(t *testing.T) {
	m := windows(window("0 8 * * *", time.Hour, "UTC"), window("0 9 * * *", 2*time.Hour, "UTC"))
	m.DriftDeadline = &metav1.Duration{Duration: 720 * time.Hour}
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Duration{8*time.Hour + 30*time.Minute, 9*time.Hour + 30*time.Minute} {
		now := day.Add(at)
		p := decideAt(t, m, now, func(in *Input, w *inputstest.World) {
			*in = withDrift(t, *in, w, day.Add(-31*24*time.Hour))
		})
		if f := p.Decision.Forced; f == nil || f.Initiator != InitiatorDeadline || !f.At.Equal(day.Add(8*time.Hour)) {
			t.Errorf("at %s: forced %+v, want the deadline's request at the window's opening 08:00", now.Format(time.RFC3339), f)
		}
	}
}

// A daily 48h window is always open: no start that moves each day, no end,
// and nothing to look again for.
func TestAWindowThatIsAlwaysOpenReportsNoStartOrEnd(t *testing.T) {
	m := windows(window("0 8 * * *", 48*time.Hour, "UTC"))
	for _, now := range []time.Time{time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)} {
		p := decideAt(t, m, now, nil)
		st := p.Maintenance
		if st == nil || st.NextWindow == nil || !st.NextWindow.Start.IsZero() || st.NextWindow.End != nil {
			t.Errorf("at %s: status.maintenance %+v, want a next window without start or end", now.Format(time.RFC3339), st)
		}
		if c := cond(p, nodepoolv1.ConditionMaintenanceWindow); c.Status != metav1.ConditionTrue || strings.Contains(c.Message, "0001") {
			t.Errorf("at %s: MaintenanceWindow %+v", now.Format(time.RFC3339), c)
		}
		if p.RequeueAfter != 0 {
			t.Errorf("at %s: requeue after %v, want none for the window", now.Format(time.RFC3339), p.RequeueAfter)
		}
	}
}

// At the second 02:20 of the fall-back night a */10 window's next opening
// is 03:00 CET (02:00Z): status names it and the controller looks again
// then.
func TestOnTheFallBackNightASubHourlyWindowIsFound(t *testing.T) {
	for _, tc := range []struct {
		zone       string
		now, opens time.Time
	}{
		{"Europe/Berlin", time.Date(2026, 10, 25, 1, 20, 0, 0, time.UTC), time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC)},
		{"America/New_York", time.Date(2026, 11, 1, 6, 20, 0, 0, time.UTC), time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC)},
	} {
		p := decideAt(t, windows(window("*/10 * * * *", 5*time.Minute, tc.zone)), tc.now, nil)
		if st := p.Maintenance; st == nil || st.NextWindow == nil || !st.NextWindow.Start.Time.Equal(tc.opens) {
			t.Errorf("%s: status.maintenance %+v, want the next window at %s", tc.zone, st, tc.opens)
		}
		if want := tc.opens.Sub(tc.now) + time.Second; p.RequeueAfter != want {
			t.Errorf("%s: requeue after %v, want %v", tc.zone, p.RequeueAfter, want)
		}
	}
}
