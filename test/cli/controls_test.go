package cli_test

import (
	"strings"
	"testing"
	"time"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/rollout"
)

func TestPauseRestartResumeAndApplyPending(t *testing.T) {
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 1, nil)
	before := waitFor(t, p, rolloutTimeout, "1 ready machine", settled(1))

	var out strings.Builder
	out.WriteString(ok(t, ns, "rollout", "pause", "workers"))
	out.WriteString(ok(t, ns, "rollout", "pause", "workers"))
	r := kubectl(t, ns, "rollout", "restart", "workers")
	out.WriteString(r.out + r.err)
	golden(t, "pause-restart", out.String(), ns)
	waitFor(t, p, 20*time.Second, "the held restart reported", func(s state) bool {
		return s.pool.Status.ObservedGeneration == s.pool.Generation && strings.Contains(conditionMessage(s.pool, nodepoolv1.ConditionUpdatingConfig), "forced rollout (restart")
	})
	if s := observe(t, p); !s.machines.Equal(before.machines) {
		t.Fatal("a paused pool replaced machines")
	}
	if st := decodeJSON[cli.RolloutStatus](t, ok(t, ns, "rollout", "status", "workers", "--watch=false", "-o", "json")); st.Phase != cli.PhasePaused {
		t.Errorf("status of the paused pool: %+v", st)
	}

	// Resume: the held restart runs.
	golden(t, "resume", ok(t, ns, "rollout", "resume", "workers")+ok(t, ns, "rollout", "resume", "workers"), ns)
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	after := waitFor(t, p, rolloutTimeout, "the machine replaced", func(s state) bool {
		return settled(1)(s) && s.machines.Intersection(before.machines).Len() == 0
	})
	h := revisionsOf(t, ns, 2)
	if h[1].Initiator != string(rollout.InitiatorRestart) || h[1].ForcedAt == nil {
		t.Errorf("the restart is recorded as %+v", h[1])
	}

	// apply-pending: refused without drift; with drift, replaces the
	// machine and is recorded as platform-initiated.
	r = fails(t, ns, cli.ExitFailure, "rollout", "apply-pending", "workers")
	golden(t, "apply-pending-nothing", r.err, ns)
	setProxyImage(t, "1")
	waitFor(t, p, 30*time.Second, "drift reported", hasDrift("apiserver-proxy"))
	golden(t, "apply-pending", ok(t, ns, "rollout", "apply-pending", "workers"), ns)
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	waitFor(t, p, rolloutTimeout, "the machine replaced, drift applied", func(s state) bool {
		return settled(1)(s) && s.machines.Intersection(after.machines).Len() == 0 && len(s.pool.Status.PendingManagementChanges) == 0
	})
	h = revisionsOf(t, ns, 3)
	if h[2].Initiator != string(rollout.InitiatorPlatform) || strings.Join(h[2].Changed, ",") != "apiserver-proxy" {
		t.Errorf("apply-pending is recorded as %+v", h[2])
	}
	if s := observe(t, p); s.pool.Annotations[nodepoolv1.AnnotationApplyPending] == "" {
		t.Error("the apply-pending annotation is not set")
	}

	// A restart at a later time is scheduled: the rollout is complete
	// until then.
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	if out := ok(t, ns, "rollout", "restart", "workers", "--at", at); !strings.Contains(out, "restart scheduled: every machine created before "+at) {
		t.Errorf("restart --at: %s", out)
	}
	waitFor(t, p, 20*time.Second, "the restart scheduled", func(s state) bool {
		return s.pool.Status.ObservedGeneration == s.pool.Generation && strings.Contains(conditionMessage(s.pool, nodepoolv1.ConditionUpdatingConfig), "scheduled")
	})
	golden(t, "status-scheduled", ok(t, ns, "rollout", "status", "workers"), ns)
	fails(t, ns, cli.ExitFailure, "rollout", "restart", "workers", "--at", "tomorrow")
	fails(t, ns, cli.ExitFailure, "rollout", "pause", "workers", "--until", "soon")

	// With -o json, a change prints the pool as it is now.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	paused := decodeJSON[nodepoolv1.NodePool](t, ok(t, ns, "rollout", "pause", "workers", "--until", until, "-o", "json"))
	if paused.Spec.Management.PausedUntil != until || paused.Name != "workers" {
		t.Errorf("pause -o json printed %+v", paused.Spec.Management)
	}
}
