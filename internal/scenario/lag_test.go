package scenario

import (
	"strings"
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

// A controller that decides on its lagging cache (without its check of
// its own writes) points the forced rollout's token back at the payload
// it replaces, which the invariant names.
func TestScenarioAControllerDecidingOnItsLaggingCachePointsAForcedRolloutsTokenBack(t *testing.T) {
	w := New(t0)
	forcedAfterAnOwnerChange(t, w)
	w.DecideOnLaggingSecrets = true
	err := w.RunFor(2 * time.Hour)
	if err == nil || !strings.Contains(err.Error(), "AForcedRolloutsTokenNeverGoesBack") {
		t.Fatalf("got %v, want AForcedRolloutsTokenNeverGoesBack to fail\n%s", err, w.Trace())
	}
}
