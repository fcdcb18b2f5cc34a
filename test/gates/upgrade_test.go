package gates

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/test/stack"
)

// An upgrade of nodepool is a controller that starts on what the last one
// left: a halted rollout stays halted and a canary stays on trial, and
// nothing is replaced, because where a rollout stands is rebuilt from the
// pool's records and the machines alone (history, the halt its record
// keeps, the machines' gates). The upgrade starts from the layout of a
// release that kept the halt as an annotation of the pool: the controller
// moves it onto the rollout's record. Not parallel: it restarts the
// controller.
func TestAnUpgradeKeepsAHaltedRolloutAndACanaryOnTrialReplacingNothing(t *testing.T) {
	halted := healthPool(t, 2, nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 30 * time.Second}})
	canary := healthPool(t, 2, nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: time.Hour}})
	for _, p := range []*nodepoolv1.NodePool{halted, canary} {
		st.WaitForPool(t, p, stack.RolloutTimeout, "2 ready nodes, every gate True", func(s stack.PoolState) bool {
			return stack.PoolSettled(2)(s) && gatesTrue(t, p) == 2
		})
	}
	rollOutBadPayload(t, halted)
	st.MustCreate(t, stack.ConfigMap(canary.Namespace, "chrony2", stack.Chrony("ntp.corp.example")))
	stack.Update(t, env.Client, canary, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = []nodepoolv1.LocalObjectReference{{Name: "chrony2"}}
	})
	isHalted := func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonRolloutHalted &&
			s.Pool.Status.Rollout != nil && s.Pool.Status.Rollout.Phase == nodepoolv1.RolloutPhaseHalted
	}
	onTrial := func(s stack.PoolState) bool {
		c := stack.Condition(s.Pool, nodepoolv1.ConditionRolloutHealthy)
		return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "canary") && s.Machines.Len() == 3 && gatesTrue(t, canary) == 2
	}
	h := st.WaitForPool(t, halted, stack.RolloutTimeout, "the bad canary halted", isHalted)
	c := st.WaitForPool(t, canary, stack.RolloutTimeout, "the canary on trial (one new machine soaking)", onTrial)

	rev, state := st.RecordState(t, halted)
	if state[nodepoolv1.AnnotationHalted] == "" {
		t.Fatalf("the halted rollout's record (revision %d) keeps %v, want its halt", rev, state)
	}
	// The upgrade, from a release that kept the halt on the pool.
	if err := st.RestartControllerWith(settings, func() error {
		for _, p := range []*nodepoolv1.NodePool{halted, canary} {
			if err := st.AsAnOlderNodepoolWroteIt(context.Background(), p); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	st.HoldsFor(t, halted, 20*time.Second, "still halted, the same machines", func(s stack.PoolState) bool {
		return isHalted(s) && s.Machines.Equal(h.Machines)
	})
	st.HoldsFor(t, canary, 10*time.Second, "the canary still on trial, the same machines", func(s stack.PoolState) bool {
		return onTrial(s) && s.Machines.Equal(c.Machines)
	})
	if r, was := st.Observe(t, halted).Pool.Status.Rollout, h.Pool.Status.Rollout; r == nil || was == nil || r.Revision != was.Revision || r.Revision == 0 {
		t.Errorf("status.rollout.revision %v after the upgrade, %v before", r, was)
	}
	st.WaitForPool(t, halted, time.Minute, "the halt moved onto the rollout's record, off the pool", func(s stack.PoolState) bool {
		for _, k := range rollout.RecordKeys {
			if s.Pool.Annotations[k] != "" {
				return false
			}
		}
		r, now := st.RecordState(t, halted)
		return r == rev && now[nodepoolv1.AnnotationHalted] == state[nodepoolv1.AnnotationHalted]
	})
}
