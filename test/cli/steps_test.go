package cli_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/internal/sim/simtest"
	"nodepool.dev/nodepool/test/stack"
)

// The steps plan predicts are the rounds Cluster API really replaces the
// machines in, for several maxSurge / maxUnavailable settings: the steps
// are counted from the new machines' creation and Ready times (a new
// round starts with a machine created once a machine of the round before
// became Ready). Machines boot in 15 s, longer than Cluster API takes to
// delete an old machine (as on real infrastructure, where a boot takes
// minutes): the rounds are then the ones maxSurge and maxUnavailable
// allow, seconds apart. A deletion slower than a boot (a long drain) makes
// more rounds than plan's steps: the steps are the fewest possible.
func TestPlannedStepsAreTheRoundsClusterAPITakes(t *testing.T) {
	for _, tc := range []struct {
		surge, unavailable int32
		steps              int32
	}{
		{1, 0, 3},
		{3, 0, 1},
		{1, 1, 2},
	} {
		t.Run(fmt.Sprintf("maxSurge %d maxUnavailable %d", tc.surge, tc.unavailable), func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			if err := simtest.CreateMachineTemplate(context.Background(), st.Env.Client, ns, "slow",
				simv1.SimMachineSpec{BootDelay: &metav1.Duration{Duration: 15 * time.Second}}); err != nil {
				t.Fatal(err)
			}
			p := newPool(t, ns, "workers", 3, func(p *nodepoolv1.NodePool) {
				p.Spec.InfrastructureTemplateRef = stack.TemplateRef("slow")
				p.Spec.Management.Replace.RollingUpdate = nodepoolv1.RollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(tc.surge)), MaxUnavailable: ptr.To(intstr.FromInt32(tc.unavailable))}
			})
			before := waitFor(t, p, 6*time.Minute, "3 ready machines", settled(3))

			edited := stack.ConfigMap(ns, "chrony", stack.Chrony("steps.corp.example"))
			edited.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
			plans := decodeJSON[[]cli.PlanResult](t, ok(t, ns, append([]string{"plan", "-o", "json"}, prefixed("-f", writeManifests(t, []client.Object{edited}))...)...))
			if len(plans) != 1 || plans[0].Rollout != cli.PlanNow || plans[0].Machines != 3 || plans[0].Steps != tc.steps {
				t.Fatalf("plan %+v, want 3 machines now in %d steps", plans, tc.steps)
			}
			if err := applyManifests(t, []client.Object{edited}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, p, 6*time.Minute, "every machine replaced", func(s state) bool {
				return settled(3)(s) && s.machines.Intersection(before.machines).Len() == 0
			})
			if got := rounds(t, ns, before.machines.UnsortedList()); got != plans[0].Steps {
				t.Errorf("Cluster API replaced the machines in %d rounds, plan said %d steps", got, plans[0].Steps)
			}
		})
	}
}

func prefixed(flag string, values []string) []string {
	var out []string
	for _, v := range values {
		out = append(out, flag, v)
	}
	return out
}

// rounds counts the rounds the new machines (those not in old, by UID)
// were created in.
func rounds(t *testing.T, ns string, old []string) int32 {
	t.Helper()
	list := &clusterv1.MachineList{}
	if err := st.Env.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{}
	for _, uid := range old {
		skip[uid] = true
	}
	type machine struct{ created, ready time.Time }
	var ms []machine
	for _, m := range list.Items {
		if skip[string(m.UID)] || !m.DeletionTimestamp.IsZero() {
			continue
		}
		var ready time.Time
		for _, c := range m.Status.Conditions {
			if c.Type == clusterv1.ReadyCondition && c.Status == metav1.ConditionTrue {
				ready = c.LastTransitionTime.Time
			}
		}
		if ready.IsZero() {
			t.Fatalf("machine %s is not Ready", m.Name)
		}
		ms = append(ms, machine{m.CreationTimestamp.Time, ready})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].created.Before(ms[j].created) })
	var n int32
	var barrier time.Time // the first Ready time of the current round
	for _, m := range ms {
		if n == 0 || !m.created.Before(barrier) {
			n++
			barrier = m.ready
		}
		if m.ready.Before(barrier) {
			barrier = m.ready
		}
	}
	return n
}
