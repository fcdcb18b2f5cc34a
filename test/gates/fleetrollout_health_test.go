package gates

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// breakNewMachines tells every machine of the pool that is not in old
// to be unhealthy (its Node turns NotReady), through the sim's knob on the
// SimMachine; it returns the machines it broke.
func breakNewMachines(t *testing.T, p *nodepoolv1.NodePool, old, broken sets.Set[string]) {
	t.Helper()
	ctx := context.Background()
	for _, m := range poolMachines(t, p) {
		uid := string(m.UID)
		if old.Has(uid) || broken.Has(uid) || m.Spec.InfrastructureRef.Name == "" {
			continue
		}
		sm := &simv1.SimMachine{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, sm); err != nil {
			continue // not created yet
		}
		stack.Update(t, env.Client, sm, func(sm *simv1.SimMachine) {
			if sm.Annotations == nil {
				sm.Annotations = map[string]string{}
			}
			sm.Annotations[simv1.AnnotationUnhealthy] = "true"
		})
		broken.Insert(uid)
	}
}

// A platform update rolled by a fleet rollout over waves [1, 3, 100%] of 6
// pools; the new machine of one pool of wave 2 turns NotReady during its
// canary soak. Its health gate halts the pool, the fleet rollout halts
// naming it, no pool of wave 3 is touched; the owner fixes the pool (an
// owner change supersedes the halted rollout), a resume continues the
// fleet rollout to the end.
//
// How the bad machine is made: a fleet rollout applies the latest
// platform payload, and a pool's own inputs that could carry the sim's
// fail-after marker (its config ConfigMaps) are rollout components, which
// roll the pool by themselves at once. So the platform change is
// fleet-wide and good (a new API-server proxy image), and the failure is
// the infrastructure's: the sim's unhealthy knob on that pool's new
// machine, set as soon as the machine exists, while its canary soaks.
func TestAFleetRolloutHaltsWhenAPoolOfWave2FailsItsHealthGateTouchesNoPoolOfWave3AndContinuesAfterTheFixAndAResume(t *testing.T) {
	const label = "health"
	pools := newFleetPools(t, label, 6, 6)
	// Waves: pool-00; pool-01, pool-02; pool-03 to pool-05.
	bad, wave3 := pools[1], pools[3:]
	stack.Update(t, env.Client, bad, func(p *nodepoolv1.NodePool) {
		p.Spec.Management.Health = &nodepoolv1.Health{
			CanarySoak:       &metav1.Duration{Duration: time.Minute},
			ProgressDeadline: &metav1.Duration{Duration: time.Minute},
		}
	})
	before := st.WaitForPool(t, bad, fleetTimeout, "the gated pool settled, RolloutHealthy True", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && gatesTrue(t, bad) == 1 && stack.IsTrue(s.Pool, nodepoolv1.ConditionRolloutHealthy)
	})
	bumpPlatform(t, pools)

	fr := newFleetRollout(t, label, func(fr *nodepoolv1.FleetRollout) {
		fr.Spec.Waves = []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(3), intstr.FromString("100%")}
	})

	// Break the bad pool's new machine as soon as it exists, until the
	// fleet rollout halts.
	broken := sets.New[string]()
	halted := stack.WaitFor(t, 5*time.Minute, "the fleet rollout halted", func() *nodepoolv1.FleetRollout {
		breakNewMachines(t, bad, before.Machines, broken)
		return readFleetRollout(t, fr)
	}, phaseIs(nodepoolv1.FleetPhaseHalted), func(fr *nodepoolv1.FleetRollout) string {
		var gates []string
		for _, m := range poolMachines(t, bad) {
			g := gateOf(&m)
			gates = append(gates, fmt.Sprintf("%s broken=%v gate=%+v", m.Name, broken.Has(string(m.UID)), g))
		}
		return describeFleet(fr) + "; bad pool: " + stack.Conditions(st.Observe(t, bad).Pool) + "; machines: " + strings.Join(gates, ", ")
	})
	if broken.Len() != 1 {
		t.Fatalf("broke %d new machines of %s, want 1", broken.Len(), bad.Name)
	}
	c := stack.Condition(st.Observe(t, bad).Pool, nodepoolv1.ConditionRolloutHealthy)
	if c.Status != metav1.ConditionFalse || (c.Reason != nodepoolv1.ReasonRolloutHalted && c.Reason != nodepoolv1.ReasonProgressDeadlineExceeded) {
		t.Fatalf("the bad pool's RolloutHealthy: %+v", c)
	}
	// Status names the pool and the failure.
	if halted.Status.HaltedAt == nil || !strings.Contains(halted.Status.Message, bad.Namespace+"/"+bad.Name) ||
		!strings.Contains(halted.Status.Message, c.Reason) || halted.Status.CurrentWave != 2 || halted.Status.Waves[1].Failed != 1 {
		t.Fatalf("halted status does not name %s and %s in wave 2: %s", bad.Name, c.Reason, describeFleet(halted))
	}
	for _, sp := range fleetPools(t, env.Client, halted) {
		if sp.Name == bad.Name && (sp.State != nodepoolv1.FleetPoolFailed || !strings.Contains(sp.Message, c.Reason)) {
			t.Fatalf("the bad pool's entry: %+v", sp)
		}
	}
	t.Logf("halted: %s", halted.Status.Message)

	// No pool of wave 3 is touched while halted.
	untouched := func(s stack.PoolState) bool {
		return s.Pool.Annotations[nodepoolv1.AnnotationFleetRollout] == "" && s.Pool.Annotations[nodepoolv1.AnnotationApplyPending] == "" && s.Pool.Status.Updating == ""
	}
	for _, p := range wave3 {
		st.HoldsFor(t, p, 3*time.Second, "a pool of wave 3 untouched while halted", untouched)
	}

	// The owner fixes the pool: a new owner change (which also shortens
	// the canary soak) supersedes the halted rollout; its machine is
	// healthy. The halt stays after the pool recovered.
	st.MustCreate(t, stack.ConfigMap(bad.Namespace, "chrony-fixed", stack.Chrony("ntp.corp.example")))
	stack.Update(t, env.Client, bad, func(p *nodepoolv1.NodePool) {
		p.Spec.Config = []nodepoolv1.LocalObjectReference{{Name: "chrony-fixed"}}
		p.Spec.Management.Health.CanarySoak = &metav1.Duration{Duration: time.Second}
	})
	st.WaitForPool(t, bad, fleetTimeout, "the fixed pool settled on a new healthy machine, RolloutHealthy True", func(s stack.PoolState) bool {
		return stack.PoolSettled(1)(s) && s.Machines.Intersection(before.Machines).Len() == 0 && s.Machines.Intersection(broken).Len() == 0 &&
			stack.IsTrue(s.Pool, nodepoolv1.ConditionRolloutHealthy)
	})
	still := readFleetRollout(t, fr)
	if still.Status.Phase != nodepoolv1.FleetPhaseHalted {
		t.Fatalf("the halt did not stay after the pool recovered: %s", describeFleet(still))
	}
	for _, p := range wave3 {
		if s := st.Observe(t, p); !untouched(s) || len(fleetRecords(t, p, fr)) != 0 {
			t.Fatalf("pool %s of wave 3 was touched before the resume: %s", p.Name, s)
		}
	}

	// The resume: the rollout continues to the end.
	stack.Update(t, env.Client, fr, func(fr *nodepoolv1.FleetRollout) { fr.Spec.ResumedAt = &metav1.Time{Time: time.Now()} })
	done := waitForFleet(t, fr, fleetTimeout, "complete after the resume", phaseIs(nodepoolv1.FleetPhaseComplete))
	if w := done.Status.Waves; len(w) != 3 || w[0].Done != 1 || w[1].Done != 2 || w[2].Done != 3 || done.Status.HaltedAt != nil {
		t.Fatalf("after the resume: %s", describeFleet(done))
	}
	for _, sp := range fleetPools(t, env.Client, done) {
		var p *nodepoolv1.NodePool
		for _, q := range pools {
			if q.Namespace == sp.Namespace && q.Name == sp.Name {
				p = q
			}
		}
		recs := fleetRecords(t, p, fr)
		want := history.OutcomeComplete
		if p == bad {
			// The fleet's record of the bad pool was superseded by the
			// owner's fix, which completed: the pool is done.
			want = history.OutcomeSuperseded
			if !strings.Contains(sp.Message, "superseded") {
				t.Errorf("the fixed pool's entry: %+v", sp)
			}
		}
		if len(recs) != 1 || recs[0].Outcome != want || sp.State != nodepoolv1.FleetPoolDone {
			t.Fatalf("pool %s: state %s, fleet records %+v; want exactly one, %s", p.Name, sp.State, recs, want)
		}
		s := st.Observe(t, p)
		if !stack.PoolSettled(1)(s) || stack.IsTrue(s.Pool, nodepoolv1.ConditionConfigUpdatePending) || s.Pool.Annotations[nodepoolv1.AnnotationFleetRollout] != "" {
			t.Fatalf("pool %s not settled without drift and released: %s; conditions: %s", p.Name, s, stack.Conditions(s.Pool))
		}
	}
	// Wave 3 started only after the resume.
	for _, p := range wave3 {
		if r := fleetRecords(t, p, fr)[0]; r.Started.Before(still.Status.HaltedAt.Time) {
			t.Fatalf("pool %s of wave 3 started at %s, before the halt at %s", p.Name, r.Started, still.Status.HaltedAt)
		}
	}
}
