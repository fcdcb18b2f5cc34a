package cli_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/test/stack"
)

func TestRolloutStatusShowsTheCanaryAndFailsWhenItHalts(t *testing.T) {
	ns := newNamespace(t)
	p := newPool(t, ns, "workers", 2, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 40 * time.Second}}
	})
	waitFor(t, p, rolloutTimeout, "2 ready machines", settled(2))
	mustCreate(t, stack.ConfigMap(ns, "bad", sim.FailAfterConfig(5*time.Second)))
	update(t, p, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = append(p.Spec.Config, nodepoolv1.LocalObjectReference{Name: "bad"})
	})
	waitFor(t, p, rolloutTimeout, "the rollout started", func(s state) bool { return s.pool.Status.Updating != "" })
	st := decodeJSON[cli.RolloutStatus](t, ok(t, ns, "rollout", "status", "workers", "--watch=false", "-o", "json"))
	if st.Health != string(rollout.HealthCanary) || !strings.Contains(st.Message, "canary") {
		t.Errorf("status during the canary = %+v, want health Canary", st)
	}
	r := fails(t, ns, cli.ExitFailure, "rollout", "status", "workers", "--timeout", "2m")
	if !strings.Contains(r.err, "RolloutHalted") || !strings.Contains(r.err, "Ready=False") {
		t.Errorf("the failure does not name the halt and the signal:\n%s%s", r.out, r.err)
	}
	st = decodeJSON[cli.RolloutStatus](t, fails(t, ns, cli.ExitFailure, "rollout", "status", "workers", "--watch=false", "-o", "json").out)
	if st.Phase != cli.PhaseFailed || st.Health != string(rollout.HealthHalted) {
		t.Errorf("status after the halt = %+v, want Failed/Halted", st)
	}
}
