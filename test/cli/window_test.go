package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/rollout"
)

// A restart the owner gated on a window that opens in three hours: the
// commands say when it rolls, rollout status exits 2 with the time, and
// restart --outside-windows needs a reason, rolls now and keeps the reason
// in rollout history.
func TestTheCommandsSayWhenAWindowLetsARolloutStart(t *testing.T) {
	ns := newNamespace(t)
	opens := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	p := newPool(t, ns, "workers", 1, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Maintenance = &nodepoolv1.Maintenance{
			Windows: []nodepoolv1.MaintenanceWindow{{Schedule: fmt.Sprintf("0 %d * * *", opens.Hour()), Duration: metav1.Duration{Duration: time.Hour}}},
			Gate:    []nodepoolv1.GatedRollout{nodepoolv1.GatedRolloutRestart},
		}
	})
	before := waitFor(t, p, rolloutTimeout, "1 ready machine", func(s state) bool {
		return settled(1)(s) && s.pool.Status.Maintenance != nil && s.pool.Status.Maintenance.NextWindow != nil
	})
	when := opens.Format(time.RFC3339)

	r := kubectl(t, ns, "rollout", "restart", "workers")
	if r.code != 0 || !strings.Contains(r.err, "rolls in its next maintenance window, at "+when) {
		t.Fatalf("restart: exit %d\n%s%s", r.code, r.out, r.err)
	}
	waitFor(t, p, 20*time.Second, "the restart held by the window", func(s state) bool {
		return s.pool.Status.ObservedGeneration == s.pool.Generation &&
			conditionMessage(s.pool, nodepoolv1.ConditionUpdatingConfig) != "" &&
			strings.Contains(conditionMessage(s.pool, nodepoolv1.ConditionUpdatingConfig), "waits for the next maintenance window")
	})
	r = fails(t, ns, cli.ExitStalled, "rollout", "status", "workers")
	if !strings.Contains(r.err, "held by its maintenance settings") || !strings.Contains(r.err, "it starts at "+when) {
		t.Errorf("rollout status does not say when the rollout starts:\n%s%s", r.out, r.err)
	}
	st := decodeJSON[cli.RolloutStatus](t, ok(t, ns, "rollout", "status", "workers", "--watch=false", "-o", "json"))
	if st.Phase != cli.PhasePaused || st.RollsAt == nil || !st.RollsAt.Equal(opens) || st.NextWindow == nil || !st.NextWindow.Equal(opens) {
		t.Errorf("status = %+v, want Paused, rolling at %s", st, when)
	}

	live := observe(t, p).pool.DeepCopy()
	live.TypeMeta = metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool"}
	live.ManagedFields, live.Status = nil, nodepoolv1.NodePoolStatus{}
	plans := decodeJSON[[]cli.PlanResult](t, ok(t, ns, "plan", "-o", "json", "-f", writeManifests(t, []client.Object{live})[0]))
	if len(plans) != 1 || plans[0].Rollout != cli.PlanDeferred || !strings.Contains(plans[0].Message, "nodes roll at "+when+" (next window)") {
		t.Errorf("plan = %+v", plans)
	}
	if out := ok(t, ns, "fleet"); !strings.Contains(out, "NEXT-WINDOW") || !strings.Contains(out, when) {
		t.Errorf("fleet does not show the next window:\n%s", out)
	}
	holdsFor := time.Now().Add(5 * time.Second)
	for time.Now().Before(holdsFor) {
		if s := observe(t, p); !s.machines.Equal(before.machines) {
			t.Fatal("a machine was replaced outside the window")
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The emergency path.
	r = fails(t, ns, cli.ExitFailure, "rollout", "restart", "workers", "--outside-windows")
	if !strings.Contains(r.err, "--outside-windows needs --reason") {
		t.Errorf("restart --outside-windows without a reason:\n%s", r.err)
	}
	ok(t, ns, "rollout", "restart", "workers", "--outside-windows", "--reason", "kernel CVE-2026-1234")
	waitFor(t, p, rolloutTimeout, "the machine replaced outside the window", func(s state) bool {
		return settled(1)(s) && s.machines.Intersection(before.machines).Len() == 0
	})
	waitFor(t, p, 30*time.Second, "the restart recorded complete", func(s state) bool {
		h := decodeJSON[[]history.Entry](t, ok(t, ns, "rollout", "history", "workers", "-o", "json"))
		e := h[len(h)-1]
		return e.Initiator == string(rollout.InitiatorRestart) && e.Outcome == history.OutcomeComplete &&
			strings.Contains(e.Reason, "kernel CVE-2026-1234")
	})
	if out := ok(t, ns, "rollout", "history", "workers"); !strings.Contains(out, "REASON") || !strings.Contains(out, "kernel CVE-2026-1234") {
		t.Errorf("rollout history does not show the reason:\n%s", out)
	}
}
