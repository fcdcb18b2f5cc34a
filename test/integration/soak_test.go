package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/test/stack"
)

// TestRandomChangesReplaceMachinesOnlyWhenAsked mixes owner changes,
// management changes, scaling, labels and forced rollouts across several
// pools with faults (an owned Secret deleted or edited by hand, the
// controller or the payload server restarted), and checks after each that a machine was replaced if and only if an
// owner change or a forced rollout of its pool asked for it. The reference
// checker of TestMain meanwhile asserts no referenced Secret is deleted.
// `make test` makes 5 changes (the combinations of changes, faults and
// restarts run by the thousand in simulated time: internal/scenario's
// random interleavings); NODEPOOL_SOAK_CHANGES=100 the full soak.
func TestRandomChangesReplaceMachinesOnlyWhenAsked(t *testing.T) {
	changes := envInt("NODEPOOL_SOAK_CHANGES", 5)
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("NODEPOOL_SOAK_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (NODEPOOL_SOAK_SEED to replay)", seed)
	rnd := rand.New(rand.NewPCG(seed, seed))

	pools := make([]*nodepoolv1.NodePool, 3)
	size := []int{2, 1, 2}
	for i := range pools {
		pools[i] = st.NewPool(t, fmt.Sprintf("soak-%d", i), int32(size[i]))
	}
	states := make([]stack.PoolState, len(pools))
	for i, p := range pools {
		states[i] = st.WaitForPool(t, p, stack.RolloutTimeout, "ready", stack.PoolSettled(size[i]))
	}
	image := 0
	for step := range changes {
		i := rnd.IntN(len(pools))
		p := pools[i]
		replace := -1 // which pool must be fully replaced; -1 none
		var what, initiator string
		records := len(st.HistoryOf(t, p))
		var restore func() bool // a fault's repair, checked once settled
		switch rnd.IntN(11) {
		case 0:
			what = "owner: config content"
			stack.Update(t, env.Client, stack.ConfigMap(p.Namespace, "chrony", ""), func(cm *corev1.ConfigMap) {
				cm.Data[inputs.ConfigKey] = stack.Chrony(fmt.Sprintf("ntp%d.corp.example", step))
			})
			replace, initiator = i, "spec"
		case 1:
			what = "owner: release version"
			stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
				if p.Spec.Release.Version == "v1.36.3" {
					p.Spec.Release.Version = "v1.36.4"
				} else {
					p.Spec.Release.Version = "v1.36.3"
				}
			})
			replace, initiator = i, "version"
		case 2:
			what = "management: API-server proxy image"
			image++
			st.SetManagementConfig(t, func(string) string {
				return fmt.Sprintf("apiServerProxyImage: registry.example/haproxy@sha256:%064x\n", 1000+image)
			})
		case 3:
			size[i] = 1 + rnd.IntN(3)
			what = fmt.Sprintf("scale to %d", size[i])
			stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(int32(size[i])) })
		case 4:
			what = "node labels"
			stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) {
				p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/step": nodepoolv1.LabelValue(strconv.Itoa(step))}
			})
		case 5:
			what = "forced: rolloutAfter now"
			// Creation times have a resolution of a second: a time a
			// second ahead is after every machine that exists now.
			at := metav1.NewTime(time.Now().Truncate(time.Second).Add(time.Second))
			stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Management.RolloutAfter = &at })
			replace, initiator = i, "restart"
		case 6:
			what = "fault: the current user-data Secret deleted"
			if err := env.Client.Delete(context.Background(), currentUserData(t, p)); err != nil {
				t.Fatal(err)
			}
		case 7:
			what = "fault: the current user-data Secret edited"
			ud := currentUserData(t, p)
			want := ud.Data["value"]
			stack.Update(t, env.Client, ud, func(s *corev1.Secret) { s.Data["value"] = []byte("garbage") })
			restore = func() bool {
				s := &corev1.Secret{}
				err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(ud), s)
				// A token rotation may have rewritten it since: anything
				// but the garbage is the controller's.
				return err == nil && string(s.Data["value"]) != "garbage" && len(s.Data["value"]) >= len(want)/2
			}
		case 8:
			what = "fault: the controller restarted"
			st.MustRestartController(t, settings)
		case 9:
			what = "fault: the payload server restarted, then a scale-up"
			if err := st.RestartPayloadServer(); err != nil {
				t.Fatal(err)
			}
			// A machine made now boots from the new server's index.
			size[i] = min(size[i]+1, 4)
			stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(int32(size[i])) })
		case 10:
			what = "fault: the API server gone for 5s, then a scale-up"
			st.CutAPIServer(5 * time.Second)
			// Issued while the controller cannot see it: it must act on it
			// once its watches are back.
			size[i] = min(size[i]+1, 4)
			stack.Update(t, env.Client, p, func(p *nodepoolv1.NodePool) { p.Spec.Replicas = ptr.To(int32(size[i])) })
		}
		t.Logf("step %d: pool %d: %s", step, i, what)
		for j, q := range pools {
			before := states[j]
			states[j] = st.WaitForPool(t, q, stack.RolloutTimeout, fmt.Sprintf("step %d (%s): pool %d settled", step, what, j), func(s stack.PoolState) bool {
				if !stack.PoolSettled(size[j])(s) {
					return false
				}
				if j == replace {
					return s.Machines.Intersection(before.Machines).Len() == 0
				}
				return true
			})
			if j != replace && !keptMachines(before.Machines, states[j].Machines) {
				t.Fatalf("step %d (%s): pool %d lost machines it did not ask to replace: before %d, after %d, kept %d",
					step, what, j, before.Machines.Len(), states[j].Machines.Len(), before.Machines.Intersection(states[j].Machines).Len())
			}
		}
		if restore != nil {
			stack.WaitFor(t, 30*time.Second, fmt.Sprintf("step %d (%s): repaired", step, what), restore,
				func(ok bool) bool { return ok }, func(ok bool) string { return fmt.Sprint(ok) })
		}
		// The history says what happened: one more record for a rollout
		// (with its initiator), none otherwise.
		if replace >= 0 {
			e := st.LastRecord(t, p, initiator, "Complete")
			// The controller keeps 10 revisions (--history-limit).
			if h := st.HistoryOf(t, p); len(h) != min(records+1, 10) || h[len(h)-1].Revision != e.Revision {
				t.Fatalf("step %d (%s): %d records after %d, want exactly one more", step, what, len(h), records)
			}
		} else if h := st.HistoryOf(t, p); len(h) != records {
			t.Fatalf("step %d (%s): a change that replaced nothing added %d history records", step, what, len(h)-records)
		}
	}
}

// keptMachines: nothing was replaced; scaling may only add or remove.
func keptMachines(before, after sets.Set[string]) bool {
	return before.IsSuperset(after) || after.IsSuperset(before)
}
