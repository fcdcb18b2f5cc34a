package scenario

import (
	"testing"
	"time"

	"nodepool.dev/nodepool/internal/rollout"
)

// forcedAfterAnOwnerChange is the test/gates window test's path on one
// machine that boots at once (an idle machine): an owner change rolls,
// the platform bumps the renderer and a person applies it, with the
// controller's cache behind its own rewrite of the user-data for the
// next 10 seconds of each.
func forcedAfterAnOwnerChange(t *testing.T, w *World) *Pool {
	t.Helper()
	w.BootDelay = time.Second
	w.SecretsLag = func() time.Duration { return 10 * time.Second }
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 1})
	w.After(time.Minute, "owner edits the config to c2", func(*World) { p.Inputs.Config = "c2" })
	w.After(20*time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(21*time.Minute, "person runs apply-pending", func(*World) { ApplyPending(p, "") })
	return p
}

// The look after a forced rollout, whose cache shows the user-data as it
// was before the rollout rewrote it, decides nothing: the forced
// rollout's token keeps serving the latest payload, and the machine
// Cluster API makes boots it.
func TestScenarioAForcedRolloutsTokenHoldsWhileTheCacheLagsBehindItsSecrets(t *testing.T) {
	w := New(t0)
	p := forcedAfterAnOwnerChange(t, w)
	run(t, w, 2*time.Hour) // AForcedRolloutsTokenNeverGoesBack is checked at every look
	wantRecord(t, w, p, rollout.InitiatorPlatform, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Obj.Status.PendingManagementChanges) != 0 {
		t.Errorf("drift left: %+v\n%s", p.Obj.Status.PendingManagementChanges, w.Trace())
	}
	golden(t, w)
}

// Even a controller that decided on its lagging cache (without its check
// of its own writes) would keep the forced rollout's token: the engine
// reads what the forced rollout boots from its record, not from the
// user-data the cache shows as it was (before it did, the token went
// back to the payload the old machine ran once the machine was replaced).
func TestScenarioAForcedRolloutsTokenHoldsEvenDecidedOnALaggingCache(t *testing.T) {
	w := New(t0)
	p := forcedAfterAnOwnerChange(t, w)
	w.DecideOnLaggingSecrets = true
	run(t, w, 2*time.Hour)
	wantRecord(t, w, p, rollout.InitiatorPlatform, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
}

// The controller stops right after the forced rollout's MachineDeployment
// write (its user-data rewrite lost with the rest of the reconcile) and
// restarts: the forced rollout's record says what it boots, so the
// user-data is written again from it, the token keeps serving it once the
// machine is replaced, and no drift is left pending.
func TestScenarioAForcedRolloutStoppedAfterItsMachineDeploymentEndsOnItsPayload(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 1})
	w.After(time.Minute, "platform bumps the renderer to r2", func(*World) { p.Inputs.Platform[CompRenderer] = "r2" })
	w.After(2*time.Minute, "person runs apply-pending; the controller will stop after its next MachineDeployment write", func(w *World) {
		ApplyPending(p, "")
		w.CrashAfterMachineDeployment = true
	})
	run(t, w, 2*time.Hour) // AForcedRolloutsTokenNeverGoesBack is checked at every look
	wantRecord(t, w, p, rollout.InitiatorPlatform, OutcomeComplete)
	wantAllOn(t, w, p, latestHash(p))
	if len(p.Obj.Status.PendingManagementChanges) != 0 {
		t.Errorf("drift left: %+v\n%s", p.Obj.Status.PendingManagementChanges, w.Trace())
	}
	if ud := p.UserData[p.MD.DataSecretName]; ud.PayloadHash != latestHash(p) {
		t.Errorf("the user-data starts from %s, want the forced payload %s\n%s", Short(ud.PayloadHash), Short(latestHash(p)), w.Trace())
	}
	golden(t, w)
}
