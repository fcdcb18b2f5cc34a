package devenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/sim"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
)

// guardedPool names the demo's pool whose nodes run guarded pods.
func (d *demo) guardedPool() string { return d.o.Pool + "-guarded" }

// drain shows a drain that cannot finish: a pool of 1 whose node runs a pod
// under a PodDisruptionBudget that allows no disruption (the sim's
// workloads), with drain policy Halt after 30s. plan predicts the block;
// the rollout reports it live and halts; relaxing the budget and a resume
// let it finish.
func (d *demo) drain(ctx context.Context) error {
	key := client.ObjectKey{Namespace: d.o.Namespace, Name: d.guardedPool()}
	config, template := key.Name+"-chrony", d.o.Template+"-guarded"
	d.begin("A drain that cannot finish: predicted by plan, reported live, halted by the drain policy",
		fmt.Sprintf("NodePool %s: replicas 1, drain {onTimeout: Halt, timeout: 30s}; its node runs a pod under", key.Name),
		fmt.Sprintf("the PodDisruptionBudget %s (maxUnavailable 0) and a pod no controller owns (sim workloads)", sim.GuardedBudget))
	if err := d.removeGuarded(ctx, key); err != nil {
		return err
	}
	if err := simtest.CreateMachineTemplate(ctx, d.c, d.o.Namespace, template, simv1.SimMachineSpec{Workloads: "guarded,bare"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the SimMachineTemplate %s: %w", template, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: config}}
	if err := d.setConfig(ctx, cm, "time.example.com"); err != nil {
		return err
	}
	pool := d.newPool(key.Name, config, template, 1,
		nodepoolv1.Management{Drain: &nodepoolv1.Drain{OnTimeout: nodepoolv1.DrainHalt, Timeout: &metav1.Duration{Duration: 30 * time.Second}}})
	if err := d.c.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating the NodePool %s: %w", key.Name, err)
	}
	if _, err := d.waitForPool(ctx, key, "1 ready node", func(s poolState, err error) bool { return err == nil && s.settled(1) }); err != nil {
		return err
	}
	if err := sleep(ctx, 2*time.Second); err != nil { // the sim places the pods and computes the budget
		return err
	}

	d.say("$ kubectl nodepool plan -f chrony.yaml   (the config edited: server ntp.example.com)")
	out, code, err := d.plan(ctx, key.Namespace, config, "ntp.example.com")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.Contains(l, "drain") || strings.Contains(l, "roll") {
			d.say("%s", strings.TrimSpace(l))
		}
	}
	d.say("(exit status %d: a drain is predicted to block)", code)

	d.say("Applying it anyway:")
	if err := d.setConfig(ctx, cm, "ntp.example.com"); err != nil {
		return err
	}
	start, last := time.Now(), ""
	s, err := d.waitForPool(ctx, key, "the rollout halted on the drain", func(s poolState, err error) bool {
		if err != nil {
			return false
		}
		for _, dr := range s.pool.Status.Drains {
			line := drainSay(dr)
			if line != last {
				d.say("%6.1fs  %s", time.Since(start).Seconds(), line)
				last = line
			}
		}
		c := meta.FindStatusCondition(s.pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == nodepoolv1.ReasonDrainHalted
	})
	if err != nil {
		return err
	}
	c := meta.FindStatusCondition(s.pool.Status.Conditions, nodepoolv1.ConditionRolloutHealthy)
	d.say("%6.1fs  RolloutHealthy=False (%s): %s", time.Since(start).Seconds(), c.Reason, c.Message)
	d.say("The owner relaxes the budget (maxUnavailable 1) and resumes: kubectl nodepool rollout resume %s", key.Name)
	if err := d.relaxBudget(ctx); err != nil {
		return err
	}
	if err := d.resume(ctx, key); err != nil {
		return err
	}
	if _, err := d.waitForPool(ctx, key, "the rollout finished", func(s poolState, err error) bool {
		return err == nil && s.settled(1) && len(s.pool.Status.Drains) == 0
	}); err != nil {
		return err
	}
	d.say("%6.1fs  drained, the old machine deleted, the pool on the new payload.", time.Since(start).Seconds())
	return nil
}

// drainSay words one drain of status.drains.
func drainSay(dr nodepoolv1.NodeDrainStatus) string {
	var pods []string
	for _, p := range dr.Pods {
		s := p.Pod
		if p.Budget != "" {
			s += " (PodDisruptionBudget " + p.Budget + ")"
		}
		pods = append(pods, s)
	}
	blocked := ""
	if dr.Blocked {
		blocked = " (blocked)"
	}
	return fmt.Sprintf("draining node %s since %s%s, held by %s", dr.Node, dr.Since.UTC().Format(time.TimeOnly), blocked, strings.Join(pods, ", "))
}

// plan runs `kubectl nodepool plan -f` in-process with the ConfigMap
// edited, and returns what it printed and its exit status.
func (d *demo) plan(ctx context.Context, ns, config, server string) (string, int, error) {
	data, err := yaml.Marshal(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config}, Data: map[string]string{inputs.ConfigKey: chrony(server)}})
	if err != nil {
		return "", 0, err
	}
	dir, err := os.MkdirTemp("", "nodepool-demo-")
	if err != nil {
		return "", 0, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "chrony.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return "", 0, err
	}
	var out, errOut bytes.Buffer
	code := cli.Run(ctx, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		[]string{"--kubeconfig", d.o.Kubeconfig, "-n", ns, "plan", "-f", file})
	return out.String() + errOut.String(), code, nil
}

// relaxBudget lets the guarded pods be evicted one at a time.
func (d *demo) relaxBudget(ctx context.Context) error {
	pdb := &policyv1.PodDisruptionBudget{}
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.o.Namespace, Name: sim.GuardedBudget}, pdb); err != nil {
		return client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(pdb.DeepCopy())
	pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	return d.c.Patch(ctx, pdb, patch)
}

// resume is `kubectl nodepool rollout resume`.
func (d *demo) resume(ctx context.Context, key client.ObjectKey) error {
	pool := &nodepoolv1.NodePool{}
	if err := d.c.Get(ctx, key, pool); err != nil {
		return err
	}
	patch := client.MergeFrom(pool.DeepCopy())
	rollout.Resume(pool)
	return d.c.Patch(ctx, pool, patch)
}

// removeGuarded deletes the guarded pool of an earlier run (its budget
// relaxed first, or its last drain would never finish) and resets the
// budget for this run.
func (d *demo) removeGuarded(ctx context.Context, key client.ObjectKey) error {
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := d.relaxBudget(ctx); err != nil {
		return err
	}
	if err := d.c.Delete(ctx, pool); client.IgnoreNotFound(err) != nil {
		return err
	} else if err == nil {
		d.say("(deleting the NodePool %s of an earlier run and waiting for its machines to go)", key.Name)
		if _, err := d.waitForPool(ctx, key, "the earlier pool to be gone", func(s poolState, err error) bool {
			return apierrors.IsNotFound(err)
		}); err != nil {
			return err
		}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: d.o.Namespace, Name: sim.GuardedBudget}}
	return client.IgnoreNotFound(d.c.Delete(ctx, pdb)) // the sim makes it again, allowing nothing
}
