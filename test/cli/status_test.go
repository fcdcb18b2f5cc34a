package cli_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	corev1 "k8s.io/api/core/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

func TestRolloutStatusWaitsForANewPoolAndAnOwnerChange(t *testing.T) {
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 2, nil)
	out := ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	golden(t, "status-complete", lines[len(lines)-1]+"\n", ns)
	if len(lines) < 2 || !strings.HasPrefix(lines[0], `Waiting for nodepool "workers" rollout to finish:`) {
		t.Errorf("status printed no progress before completing:\n%s", out)
	}
	before := observe(t, p)

	// An owner change: status follows the rollout to its end.
	update(t, stack.ConfigMap(ns, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("ntp.corp.example") })
	waitFor(t, p, 20*time.Second, "the rollout started", func(s state) bool { return s.pool.Status.Updating != "" })
	out = ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")
	if !strings.Contains(out, "RollingOut") || !strings.Contains(out, "successfully rolled out") {
		t.Errorf("status did not follow the rollout:\n%s", out)
	}
	after := observe(t, p)
	if after.machines.Intersection(before.machines).Len() != 0 || after.machines.Len() != 2 {
		t.Errorf("status returned before every machine was replaced: %v → %v", sets.List(before.machines), sets.List(after.machines))
	}

	// Once, as JSON.
	st := decodeJSON[cli.RolloutStatus](t, ok(t, ns, "rollout", "status", "workers", "--watch=false", "-o", "json"))
	if st.Phase != cli.PhaseComplete || st.UpToDate != 2 || st.Desired != 2 || st.Version != "v1.36.3" {
		t.Errorf("status = %+v", st)
	}
	if r := st.Revision; r == nil || r.Revision != 2 || r.Initiator != "spec" || r.Outcome != "Complete" {
		t.Errorf("status names revision %+v, want 2 (spec, Complete): the owner change", r)
	}
}

func TestRolloutStatusFailsStallsAndTimesOut(t *testing.T) {
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 1, nil)
	waitFor(t, p, rolloutTimeout, "1 ready machine", settled(1))

	// Paused with a pending change: only a person ends it.
	ok(t, ns, "rollout", "pause", "workers")
	update(t, stack.ConfigMap(ns, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = stack.Chrony("paused.corp.example") })
	waitFor(t, p, 20*time.Second, "the pause reported", func(s state) bool {
		return s.pool.Status.ObservedGeneration == s.pool.Generation && strings.Contains(conditionMessage(s.pool, nodepoolv1.ConditionUpdatingConfig), "paused")
	})
	r := fails(t, ns, cli.ExitStalled, "rollout", "status", "workers")
	golden(t, "status-paused", r.out+r.err, ns)

	// A short timeout while the rollout runs.
	ok(t, ns, "rollout", "resume", "workers")
	fails(t, ns, cli.ExitTimeout, "rollout", "status", "workers", "--timeout", "1ms")
	ok(t, ns, "rollout", "status", "workers", "--timeout", "2m")

	// Invalid inputs: the rollout cannot proceed.
	update(t, stack.ConfigMap(ns, "chrony", ""), func(cm *corev1.ConfigMap) { cm.Data[inputs.ConfigKey] = "ignition: {version: 9.9.9}\n" })
	waitFor(t, p, 20*time.Second, "the invalid config reported", func(s state) bool {
		return conditionStatus(s.pool, nodepoolv1.ConditionValidMachineConfig) == "False"
	})
	r = fails(t, ns, cli.ExitFailure, "rollout", "status", "workers")
	if !strings.Contains(r.err, "ValidMachineConfig is False") || !strings.Contains(r.err, "ConfigMap "+ns+"/chrony") {
		t.Errorf("the failure does not name the condition and the ConfigMap:\n%s%s", r.out, r.err)
	}
}

func conditionMessage(p *nodepoolv1.NodePool, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

func conditionStatus(p *nodepoolv1.NodePool, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return string(c.Status)
		}
	}
	return ""
}
