package cli

import (
	"fmt"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// drainsFleet fills a fleet row's drains from the pool's status.drains:
// the nodes being drained and those blocked past the drain timeout.
func drainsFleet(r *FleetRow, p *nodepoolv1.NodePool) {
	r.Draining = len(p.Status.Drains)
	for _, d := range p.Status.Drains {
		if d.Blocked {
			r.DrainsBlocked++
		}
	}
}

// withDrains reports whether a row has a node being drained: the DRAINS
// column is shown then.
func withDrains(rows []FleetRow) bool {
	for _, r := range rows {
		if r.Draining > 0 {
			return true
		}
	}
	return false
}

// drainsCell is "-", the nodes being drained, or "2 (1 blocked)".
func drainsCell(r FleetRow) string {
	switch {
	case r.Draining == 0:
		return "-"
	case r.DrainsBlocked > 0:
		return fmt.Sprintf("%d (%d blocked)", r.Draining, r.DrainsBlocked)
	}
	return fmt.Sprint(r.Draining)
}
