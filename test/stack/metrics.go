package stack

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
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

// ControllerView words what the in-process controller's metrics say of
// pool p, for a failure message: when its last reconcile ended (on the
// controller's clock), its reconcile errors by stage, and the reconciles
// of any pool that would have started a rollout on a stale cached pool
// and wrote nothing. A wait that times out then tells a pool never looked
// at (a missed wakeup) from one looked at that decided otherwise or
// failed. Empty when the controller runs in another process.
func ControllerView(p *nodepoolv1.NodePool) string {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return ""
	}
	var out []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			ofPool := l["namespace"] == p.Namespace && l["pool"] == p.Name
			switch {
			case f.GetName() == "nodepool_pool_last_reconcile_timestamp_seconds" && ofPool:
				at := time.Unix(0, int64(m.GetGauge().GetValue()*float64(time.Second))).UTC()
				out = append(out, "last reconcile ended "+at.Format(time.RFC3339Nano)+" (controller's clock)")
			case f.GetName() == "nodepool_reconcile_errors_total" && ofPool:
				out = append(out, fmt.Sprintf("reconcile errors (%s): %v", l["stage"], m.GetCounter().GetValue()))
			case f.GetName() == "nodepool_stale_pool_decisions_total":
				out = append(out, fmt.Sprintf("stale pool decisions (every pool): %v", m.GetCounter().GetValue()))
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
