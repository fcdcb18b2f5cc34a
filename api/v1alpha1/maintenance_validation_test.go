package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "nodepool.dev/nodepool/api/v1alpha1"
)

// saturdays is the example of the docs: platform updates only on Saturdays
// 02:00–06:00 Berlin time, never in the year-end freeze, never later than
// 30 days.
func saturdays() *v1.Maintenance {
	return &v1.Maintenance{
		Windows: []v1.MaintenanceWindow{{Schedule: "0 2 * * 6", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
		Exclusions: []v1.MaintenanceExclusion{{
			Name:  "year-end-freeze",
			Start: metav1.NewTime(time.Date(2026, 12, 18, 0, 0, 0, 0, time.UTC)),
			End:   metav1.NewTime(time.Date(2027, 1, 6, 0, 0, 0, 0, time.UTC)),
		}},
		Gate:          []v1.GatedRollout{v1.GatedRolloutRestart},
		DriftDeadline: &metav1.Duration{Duration: 720 * time.Hour},
	}
}

func TestMaintenanceSettingsAreAccepted(t *testing.T) {
	ns := env.NewNamespace(t)
	for i, m := range []*v1.Maintenance{
		saturdays(),
		{Windows: []v1.MaintenanceWindow{{Schedule: "@weekly", Duration: metav1.Duration{Duration: time.Minute}}}},
		{Windows: []v1.MaintenanceWindow{{Schedule: "*/15 1-5 * JAN-MAR MON,WED", Duration: metav1.Duration{Duration: 168 * time.Hour}, TimeZone: "America/Argentina/Buenos_Aires"}}},
		{DriftDeadline: &metav1.Duration{Duration: time.Hour}},
	} {
		p := minimal(ns, fmt.Sprintf("ok-%d", i))
		p.Spec.Management.Maintenance = m
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Fatalf("valid maintenance settings %d refused: %v", i, err)
		}
	}
	got := &v1.NodePool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ok-0"}, got); err != nil {
		t.Fatal(err)
	}
	if s := got.Spec.Management.Maintenance.Exclusions[0].Scope; s != v1.ExclusionScopeAll {
		t.Errorf("an exclusion's scope defaults to %q, want All", s)
	}
}

func TestInvalidMaintenanceSettingsAreRefusedNamingTheField(t *testing.T) {
	ns := env.NewNamespace(t)
	window := func(schedule string, d time.Duration, zone string) func(*v1.Maintenance) {
		return func(m *v1.Maintenance) {
			m.Windows = []v1.MaintenanceWindow{{Schedule: schedule, Duration: metav1.Duration{Duration: d}, TimeZone: zone}}
		}
	}
	cases := []struct {
		name   string
		mutate func(m *v1.Maintenance)
		want   string
	}{
		{"a schedule of four fields", window("0 2 * *", time.Hour, ""),
			`spec.management.maintenance.windows[].schedule must be a cron schedule of five fields (minute hour day-of-month month day-of-week) such as "0 2 * * 6"`},
		{"a schedule in words", window("every saturday", time.Hour, ""),
			`spec.management.maintenance.windows[].schedule must be a cron schedule of five fields`},
		{"a time zone inside the schedule", window("CRON_TZ=Europe/Berlin 0 2 * * 6", time.Hour, ""),
			"set the time zone in timeZone"},
		{"an unknown descriptor", window("@fortnightly", time.Hour, ""),
			`spec.management.maintenance.windows[].schedule must be a cron schedule`},
		{"a time zone with a space", window("0 2 * * 6", time.Hour, "Europe/New Berlin"),
			`spec.management.maintenance.windows[].timeZone must be an IANA time zone name such as Europe/Berlin or UTC, got "Europe/New Berlin"`},
		{"a time zone as an offset", window("0 2 * * 6", time.Hour, "+02:00"),
			`spec.management.maintenance.windows[].timeZone must be an IANA time zone name`},
		{"a zero duration", window("0 2 * * 6", 0, ""),
			"spec.management.maintenance.windows[].duration must be a duration between 1m and 168h (one week)"},
		{"a duration above a week", window("0 2 * * 6", 169*time.Hour, ""),
			"spec.management.maintenance.windows[].duration must be a duration between 1m and 168h"},
		{"an exclusion ending before it starts", func(m *v1.Maintenance) {
			m.Exclusions[0].End = metav1.NewTime(m.Exclusions[0].Start.Add(-time.Hour))
		}, "spec.management.maintenance.exclusions[].end must be after its start"},
		{"an exclusion of no length", func(m *v1.Maintenance) { m.Exclusions[0].End = m.Exclusions[0].Start },
			"spec.management.maintenance.exclusions[].end must be after its start"},
		{"an unknown exclusion scope", func(m *v1.Maintenance) { m.Exclusions[0].Scope = "Owner" },
			`spec.management.maintenance.exclusions[0].scope: Unsupported value: "Owner": supported values: "All", "Platform"`},
		{"an unknown gated rollout", func(m *v1.Maintenance) { m.Gate = []v1.GatedRollout{"Platform"} },
			`supported values: "Owner", "Restart"`},
		{"a drift deadline of a minute", func(m *v1.Maintenance) { m.DriftDeadline = &metav1.Duration{Duration: time.Minute} },
			"spec.management.maintenance.driftDeadline must be a duration between 1h and 8760h (one year)"},
		{"a drift deadline beyond a year", func(m *v1.Maintenance) { m.DriftDeadline = &metav1.Duration{Duration: 9000 * time.Hour} },
			"spec.management.maintenance.driftDeadline must be a duration between 1h and 8760h"},
		{"nothing set", func(m *v1.Maintenance) { *m = v1.Maintenance{} },
			"spec.management.maintenance must set windows, exclusions or driftDeadline"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := minimal(ns, fmt.Sprintf("bad-%d", i))
			m := saturdays()
			tc.mutate(m)
			p.Spec.Management.Maintenance = m
			err := env.Client.Create(context.Background(), p)
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, tc.want)
			}
		})
	}
}
