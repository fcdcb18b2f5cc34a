package scenario

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/rollout"
)

// A rollout is its record: what the engine keeps about it (its halt, a
// drain halt, what a forced rollout returns to, a rollback) lives on the
// record and ends with it; the pool's annotations hold only people's
// requests.

// haltedPool is a pool of 3 whose change to c2 failed its canary and
// halted (failurePolicy Halt).
func haltedPool(t *testing.T, w *World) *Pool {
	t.Helper()
	return failedPool(t, w, nodepoolv1.FailurePolicyHalt, time.Hour, rollout.HealthHalted) // identity_test.go
}

// poolAnnotationsHoldNoState fails when any of the engine's record keys is
// an annotation of the pool.
func poolAnnotationsHoldNoState(t *testing.T, w *World, p *Pool) {
	t.Helper()
	for _, k := range rollout.RecordKeys {
		if v := p.Annotation(k); v != "" {
			t.Errorf("the pool's annotation %s=%q: a rollout's state is kept on its record\n%s", k, v, w.Trace())
		}
	}
}

func TestScenarioAHaltIsKeptOnItsRolloutsRecordAndEndsWithIt(t *testing.T) {
	w := New(t0)
	p := haltedPool(t, w)
	halted := p.History[len(p.History)-1]
	if v := p.Recorded(nodepoolv1.AnnotationHalted); !strings.HasPrefix(v, halted.RolloutHash+"/") {
		t.Errorf("the current record (revision %d) keeps the halt %q, want the halt of rollout %s\n%s", halted.Revision, v, halted.RolloutHash, w.Trace())
	}
	poolAnnotationsHoldNoState(t, w, p)
	if r := p.Obj.Status.Rollout; r == nil || r.Revision != halted.Revision || r.Phase != nodepoolv1.RolloutPhaseHalted {
		t.Errorf("status.rollout %+v, want revision %d Halted", r, halted.Revision)
	}
	w.After(time.Minute, "owner undoes: config c1", func(*World) { p.Inputs.Config = "c1" })
	run(t, w, 2*time.Hour)
	if n := len(p.History); p.History[n-1].Revision == halted.Revision {
		t.Fatalf("the undo started no record\n%s", w.Trace())
	}
	if v := p.Recorded(nodepoolv1.AnnotationHalted); v != "" {
		t.Errorf("the undo's record starts with the halt %q of the rollout it ended\n%s", v, w.Trace())
	}
	poolAnnotationsHoldNoState(t, w, p)
}

// A resume request names its rollout: one that names a rollout that ended
// resumes nothing (a person who resumed what they saw halted does not
// resume a newer halt they never saw), and is removed.
func TestScenarioAResumeResumesOnlyTheRolloutItNames(t *testing.T) {
	w := New(t0)
	p := haltedPool(t, w)
	current := p.History[len(p.History)-1].Revision
	w.After(time.Minute, "a resume request names an older revision", func(*World) {
		p.setAnnotation(nodepoolv1.AnnotationResume, strconv.FormatInt(current-1, 10))
		p.touch()
	})
	run(t, w, 30*time.Minute)
	if p.Phase() != rollout.HealthHalted {
		t.Fatalf("a resume of revision %d resumed revision %d: phase %q\n%s", current-1, current, p.Phase(), w.Trace())
	}
	if v := p.Annotation(nodepoolv1.AnnotationResume); v != "" {
		t.Errorf("the resume request %q was not removed\n%s", v, w.Trace())
	}
	ignored := false
	for _, e := range p.Events {
		ignored = ignored || e.Reason == nodepoolv1.EventResumeIgnored && strings.Contains(e.Message, "revision "+strconv.FormatInt(current, 10))
	}
	if !ignored {
		t.Errorf("no %s event naming the current revision %d: %+v", nodepoolv1.EventResumeIgnored, current, p.Events)
	}
	w.After(time.Minute, "person deletes the failed canary and resumes", func(*World) {
		for _, m := range p.Machines {
			if m.Payload == latestHash(p) {
				p.DeleteMachine(m.Name)
			}
		}
		p.Resumed()
	})
	run(t, w, 2*time.Minute)
	if v := p.Recorded(nodepoolv1.AnnotationHalted); v != "" {
		t.Errorf("resumed, the record still keeps the halt %q\n%s", v, w.Trace())
	}
	if v := p.Annotation(nodepoolv1.AnnotationResume); v != "" {
		t.Errorf("the resume request %q was not removed once carried out\n%s", v, w.Trace())
	}
}

// An upgrade from a nodepool that kept a rollout's state as pool
// annotations: a halted pool stays halted and a pool whose canary is on
// trial stays on trial, the state moves onto the records, and nothing is
// replaced.
func TestScenarioAnUpgradeMovesTheStateOntoTheRecordsReplacingNothing(t *testing.T) {
	w := New(t0)
	halted := haltedPool(t, w)
	canary := settleNew(t, w, PoolSpec{Name: "canary", Replicas: 2, Edit: func(np *nodepoolv1.NodePool) {
		np.Spec.Management.Health = health(1, 2*time.Hour, 0, nodepoolv1.FailurePolicyHalt)
	}})
	w.After(time.Minute, "canary's owner edits the config to c3", func(*World) { canary.Inputs.Config = "c3" })
	run(t, w, 20*time.Minute)
	if canary.Phase() != rollout.HealthCanary {
		t.Fatalf("canary phase %q, want Canary\n%s", canary.Phase(), w.Trace())
	}
	names := func(p *Pool) string {
		var out []string
		for _, m := range p.Machines {
			out = append(out, m.Name)
		}
		return strings.Join(out, ",")
	}
	before := map[*Pool]string{halted: names(halted), canary: names(canary)}
	halt := halted.Recorded(nodepoolv1.AnnotationHalted)
	w.After(time.Minute, "nodepool upgrades from a release that kept the state on the pool", func(w *World) {
		halted.AsAnOlderNodepoolWroteIt()
		canary.AsAnOlderNodepoolWroteIt()
		w.Restart()
	})
	run(t, w, 30*time.Minute)
	if halted.Phase() != rollout.HealthHalted || canary.Phase() != rollout.HealthCanary {
		t.Errorf("after the upgrade: halted pool %q, canary pool %q; want Halted and Canary\n%s", halted.Phase(), canary.Phase(), w.Trace())
	}
	for p, was := range before {
		if now := names(p); now != was {
			t.Errorf("pool %s's machines %s after the upgrade, were %s\n%s", p.Name, now, was, w.Trace())
		}
		poolAnnotationsHoldNoState(t, w, p)
	}
	if got := halted.Recorded(nodepoolv1.AnnotationHalted); got != halt {
		t.Errorf("the record keeps the halt %q after the upgrade, want %q\n%s", got, halt, w.Trace())
	}
}

// After a restart the controller looks at a pool before its connection to
// the pool's Cluster is up: it once wrote that the pool had no nodes
// (status.nodes empty, AllNodesHealthy "0 nodes ready") and wrote them
// back at its next look, two status writes a pool that no node change
// caused (the resync of a fleet in many Clusters wrote 119 times for 300
// pools).
func TestScenarioARestartWritesNothingOfNodesItCannotReadYet(t *testing.T) {
	w := New(t0)
	p := settleNew(t, w, PoolSpec{Name: "workers", Replicas: 3})
	before := p.Obj.Status.DeepCopy()
	w.After(time.Minute, "controller restarts", func(w *World) { w.Restart() })
	run(t, w, time.Minute) // the restarted controller's first look
	if p.lastPlan == nil || p.nodesUnread {
		t.Fatalf("the restarted controller did not look at the pool\n%s", w.Trace())
	}
	if !equality.Semantic.DeepEqual(before.Nodes, p.Obj.Status.Nodes) {
		t.Errorf("status.nodes went from %+v to %+v over a restart\n%s", before.Nodes, p.Obj.Status.Nodes, w.Trace())
	}
	was, now := meta.FindStatusCondition(before.Conditions, nodepoolv1.ConditionAllNodesHealthy), meta.FindStatusCondition(p.Obj.Status.Conditions, nodepoolv1.ConditionAllNodesHealthy)
	if now == nil || now.Message != was.Message || now.LastTransitionTime != was.LastTransitionTime {
		t.Errorf("AllNodesHealthy went from %+v to %+v over a restart", was, now)
	}
}
