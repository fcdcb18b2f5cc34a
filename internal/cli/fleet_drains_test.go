package cli

import (
	"strings"
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// The fleet shows, when a pool drains a node, how many of its nodes are
// being drained and how many are blocked past the drain timeout.
func TestTheFleetCountsDrainsAndBlockedDrains(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	pool := func(name string, drains ...nodepoolv1.NodeDrainStatus) nodepoolv1.NodePool {
		p := nodepoolv1.NodePool{}
		p.Namespace, p.Name, p.Spec.ClusterName = "team-a", name, "c1"
		p.Status.Drains = drains
		return p
	}
	quiet := fleetRows(now, []nodepoolv1.NodePool{pool("idle")}, false)
	var out strings.Builder
	if err := fleetTable(now, quiet).print(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "DRAINS") {
		t.Errorf("a fleet that drains nothing shows a DRAINS column:\n%s", out.String())
	}
	rows := fleetRows(now, []nodepoolv1.NodePool{
		pool("idle"),
		pool("rolling", nodepoolv1.NodeDrainStatus{Node: "n1"}),
		pool("stuck", nodepoolv1.NodeDrainStatus{Node: "n2", Blocked: true}, nodepoolv1.NodeDrainStatus{Node: "n3"}),
	}, false)
	if rows[2].Draining != 2 || rows[2].DrainsBlocked != 1 {
		t.Errorf("row %+v, want 2 draining, 1 blocked", rows[2])
	}
	out.Reset()
	if err := fleetTable(now, rows).print(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "DRAINS") {
		t.Fatalf("fleet table:\n%s", out.String())
	}
	for i, want := range []string{"-", "1", "2 (1 blocked)"} {
		if !strings.HasSuffix(strings.TrimSpace(lines[i+1]), " "+want) {
			t.Errorf("row %q, want DRAINS %q", lines[i+1], want)
		}
	}
}
