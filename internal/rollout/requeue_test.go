package rollout

import (
	"testing"
	"time"

	"nodepool.dev/nodepool/internal/inputs/inputstest"
)

// A pool whose machines are not all ready is looked at again within
// NotReadyPollInterval, not only at the resync: its rollout is complete on
// record (a new pool's is at once), so nothing else polls it, and a missed
// Node or Machine event would otherwise leave a health-gated machine
// without its gate until the resync.
func TestAPoolWithMachinesNotReadyIsLookedAtAgainSoon(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	in.Settings.ResyncPeriod = 5 * time.Minute
	in.Settings.TokenTTL = 24 * time.Hour
	if p := Decide(in); p.RequeueAfter > 0 && p.RequeueAfter <= NotReadyPollInterval {
		t.Fatalf("a settled, ready pool is requeued after %s; want the resync, not the poll", p.RequeueAfter)
	}
	in.MachineDeployment.ReadyReplicas = 0
	if p := Decide(in); p.RequeueAfter == 0 || p.RequeueAfter > NotReadyPollInterval {
		t.Errorf("a pool with 0 of %d machines ready is requeued after %s, want at most %s", in.MachineDeployment.Replicas, p.RequeueAfter, NotReadyPollInterval)
	}
}
