package devenv

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/sim"
)

// healthGate turns on the pool's health gate with Rollback, rolls out a
// payload whose nodes turn NotReady 5s after they boot (the sim's
// fail-after marker), and shows the canary failing its soak and the pool
// rolling itself back: no other machine touched, a rollback in the history.
func (d *demo) healthGate(ctx context.Context) error {
	bad := d.o.Pool + "-bad"
	d.begin("A health-gated rollout of a bad payload: the canary fails and the pool rolls back",
		"spec.management.health: canary 1, canarySoak 30s, failurePolicy Rollback (enabling it replaces nothing)",
		fmt.Sprintf("ConfigMap %s writes %s = 5s: the sim makes nodes booting it NotReady 5s later; added to spec.config", bad, sim.FailAfterPath))
	pool := &nodepoolv1.NodePool{}
	if err := d.c.Get(ctx, d.key, pool); err != nil {
		return err
	}
	before, err := observePool(ctx, d.c, d.key)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: bad},
		Data: map[string]string{inputs.ConfigKey: sim.FailAfterConfig(5 * time.Second)}}
	if err := d.c.Create(ctx, cm); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Management.Health = &nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 30 * time.Second},
		FailurePolicy: nodepoolv1.FailurePolicyRollback}
	pool.Spec.Config = append(pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: bad})
	if err := d.c.Patch(ctx, pool, patch); err != nil {
		return err
	}
	start, last, sawRollback := time.Now(), "", false
	s, err := d.waitFor(ctx, "the rollback to finish", func(s poolState, err error) bool {
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(s.pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
		health := "-"
		if c != nil {
			health = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			sawRollback = sawRollback || c.Reason == nodepoolv1.ReasonRollingBack
		}
		line := fmt.Sprintf("%d machines (%d of the old ones), nodes %v; RolloutHealthy %s", len(s.machines), s.countIn(before.uids()), s.payloads(), health)
		if line != last {
			d.say("%6.1fs  %s", time.Since(start).Seconds(), line)
			last = line
		}
		return sawRollback && s.settled(len(before.machines)) && s.onlyPayload() == before.onlyPayload()
	})
	if err != nil {
		return err
	}
	d.say("rolled back in %s: the same %d machines on %s; the canary was removed.", time.Since(start).Round(time.Second), s.countIn(before.uids()), s.onlyPayload())
	revs := &appsv1.ControllerRevisionList{}
	if err := d.c.List(ctx, revs, client.InNamespace(d.o.Namespace), client.MatchingLabels{nodepoolv1.LabelPool: d.o.Pool}); err != nil {
		return err
	}
	if err := d.c.Get(ctx, d.key, pool); err != nil {
		return err
	}
	records := history.Records(pool, revs.Items)
	for i := range records {
		if e, err := history.Decode(&records[i]); err == nil && (e.Outcome == history.OutcomeFailed || e.RollbackOf > 0) {
			d.say("revision %d: initiator %s, outcome %s%s", e.Revision, e.Initiator, e.Outcome, rollbackOf(e))
		}
	}
	d.say("The pool keeps the previous revision until the owner changes it again (kubectl nodepool rollout status %s: RolledBack).", d.o.Pool)
	return nil
}

func rollbackOf(e history.Entry) string {
	if e.RollbackOf == 0 {
		return ""
	}
	return fmt.Sprintf(", rolling back revision %d", e.RollbackOf)
}
