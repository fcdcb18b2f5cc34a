package stack

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric is the value of a counter or gauge series the controller exports
// (it runs in the test's process) whose labels include labels; false when
// there is no such series.
func Metric(t testing.TB, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}
