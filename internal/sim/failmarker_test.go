package sim

import (
	"testing"
	"time"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

func TestAPayloadsFailAfterMarkerIsRead(t *testing.T) {
	for _, tc := range []struct {
		name, ignition string
		want           *time.Duration
		err            bool
	}{
		{name: "no marker", ignition: `{"ignition":{"version":"3.5.0"}}`},
		{name: "a plain data URL", ignition: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/nodepool-sim/fail-after","contents":{"source":"data:,5s"}}]}}`, want: durationPtr(5 * time.Second)},
		{name: "base64", ignition: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/nodepool-sim/fail-after","contents":{"source":"data:;base64,MW0K"}}]}}`, want: durationPtr(time.Minute)},
		{name: "not a duration", ignition: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/nodepool-sim/fail-after","contents":{"source":"data:,soon"}}]}}`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := failAfter([]byte(tc.ignition))
			if (err != nil) != tc.err || (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("failAfter = %v, %v; want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestAMachineOnAMarkedPayloadFailsAtItsTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sm := &simv1.SimMachine{}
	if failing, in := failedByPayload(sm, now); failing || in != 0 {
		t.Errorf("a machine without a marker fails: %v %v", failing, in)
	}
	sm.Status.FailAt = failAtTime(now, 5*time.Second)
	if failing, in := failedByPayload(sm, now); failing || in != 5*time.Second {
		t.Errorf("before its time: failing %v, again in %v; want false, 5s", failing, in)
	}
	if failing, _ := failedByPayload(sm, now.Add(5*time.Second)); !failing {
		t.Error("at its time the machine is still healthy")
	}
}

func durationPtr(d time.Duration) *time.Duration { return &d }
