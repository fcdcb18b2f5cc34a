package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/secrets"
)

// gatesOf is the plan's gate writes as machine → "True/Reason".
func gatesOf(p Plan) map[string]string {
	got := map[string]string{}
	for _, g := range p.Gates {
		got[g.Machine] = map[bool]string{true: "True", false: "False"}[g.Status] + "/" + g.Reason
	}
	return got
}

func onOld(name, ud, version string) MachineHealth {
	return MachineHealth{Name: name, UserData: ud, Version: version, Created: t0.Add(-time.Hour), Node: name, Healthy: true,
		HealthySince: t0.Add(-time.Hour), Gate: &Gate{Status: true, Reason: nodepoolv1.GateReasonNotOnTrial}}
}

func noStart(t *testing.T, p Plan) {
	t.Helper()
	for _, a := range p.NodeActions {
		if a.Step == StepStart {
			t.Errorf("node %s starts its update: %+v", a.Node, p.NodeActions)
		}
	}
}

// Issue 29, point 1: apply-pending, a fleet trigger or rolloutAfter keeps
// the user-data's name; the nodes updated since the forced time are on
// trial, the next waits for their soak, and an unhealthy one halts.
func TestAForcedInPlaceRolloutIsHealthGated(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: 30 * time.Minute}}
	in := inPlaceSettled(t, w)
	before := in.Latest.Hash
	bumpProxyImage(w)
	in = relatest(t, in, w)
	in.Current = &CurrentRollout{Revision: 2} // the rollout's record keeps its state
	tokenName := secrets.TokenSecretName(in.Pool.Name, in.Hashes.Rollout)
	tok := in.Tokens[tokenName]
	tok.PayloadHash = in.Latest.Hash
	in.Tokens[tokenName] = tok
	in.Payloads[in.Latest.Hash] = in.Latest
	in.Pool.Annotations[nodepoolv1.AnnotationForcedFrom] = in.Hashes.Rollout + "/" + before
	forcedAt := t0.Add(-10 * time.Minute)
	in.MachineDeployment.RolloutAfter = &forcedAt
	in.MachineDeployment.MachinesBeforeRolloutAfter = 2
	in.MachineDeployment.Complete = false
	in.InPlace.Machines[0].UpdatedAt = t0.Add(-10 * time.Second) // m1: updated by the forced rollout
	in.InPlace.Machines[0].Current = in.Latest.Hash
	for _, m := range in.InPlace.Machines {
		in.Machines = append(in.Machines, MachineHealth{Name: m.Machine, Node: m.Node, Healthy: true, HealthySince: t0.Add(-time.Hour)})
	}
	p := Decide(in)
	h := p.Decision.Health
	if h == nil || h.Phase != HealthCanary || len(h.Soaking) != 1 || h.Soaking[0] != "m1" {
		t.Fatalf("health %+v, want Canary with m1 soaking", h)
	}
	noStart(t, p)

	in.Machines[0].Healthy, in.Machines[0].Signal = false, "Ready=False (KubeletNotReady)"
	p = Decide(in)
	if h := p.Decision.Health; h == nil || h.Phase != HealthHalted || h.Machine != "m1" {
		t.Fatalf("health %+v, want Halted on m1", h)
	}
	noStart(t, p)
	if p.Decision.TokenPayload != before {
		t.Errorf("while halted new nodes get %s, want the last healthy payload %s", p.Decision.TokenPayload, before)
	}
	if !strings.HasPrefix(p.RecordState[nodepoolv1.AnnotationHalted], in.Hashes.Rollout+"/") {
		t.Errorf("halted annotation %q, want the rollout recorded", p.RecordState[nodepoolv1.AnnotationHalted])
	}
}

// Issue 29, point 2: 10 replicas, maxSurge 3, canary 1, soak 0: the two
// machines made with the canary are held until it soaked, and the
// MachineDeployment's surge is the canary while it is on trial.
func TestTheCanaryHoldsTheRestOfItsRound(t *testing.T) {
	health := nodepoolv1.Health{Canary: ptr.To(intstr.FromInt32(1)), CanarySoak: &metav1.Duration{Duration: 30 * time.Minute},
		Soak: &metav1.Duration{}, ProgressDeadline: &metav1.Duration{Duration: 15 * time.Minute}}
	t.Run("the machines beyond the canary stay gated", func(t *testing.T) {
		old := &UserData{Name: "workers-old", RolloutHash: "old", Version: "v1"}
		next := &UserData{Name: "workers-new", RolloutHash: "new", Version: "v1"}
		var machines []MachineHealth
		for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			machines = append(machines, onOld(n, old.Name, "v1"))
		}
		for i, n := range []string{"c1", "c2", "c3"} {
			machines = append(machines, MachineHealth{Name: n, UserData: next.Name, Version: "v1", Created: t0.Add(-5*time.Minute + time.Duration(i)*time.Second),
				Node: n, Healthy: true, HealthySince: t0.Add(-4 * time.Minute)})
		}
		h := health
		pool := &nodepoolv1.NodePool{Spec: nodepoolv1.NodePoolSpec{Replicas: ptr.To[int32](10), Management: nodepoolv1.Management{Health: &h}}}
		in := Input{Pool: pool, Now: t0, Machines: machines}
		s := decideHealth(in, Decision{Target: next, Running: old, Replicas: 10, InProgress: true}, old)
		got := gatesOf(Plan{Gates: s.gates})
		want := map[string]string{"c1": "False/Soaking", "c2": "False/WaitingForCanary", "c3": "False/WaitingForCanary"}
		for m, g := range want {
			if got[m] != g {
				t.Errorf("gate of %s = %q, want %q (all %v)", m, got[m], g, got)
			}
		}
		if s.Phase != HealthCanary {
			t.Errorf("phase %s, want Canary", s.Phase)
		}
	})
	t.Run("the surge is the canary while it is on trial", func(t *testing.T) {
		w := inputstest.New()
		h := health
		w.Pool.Spec.Replicas = ptr.To[int32](10)
		w.Pool.Spec.Management.Health = &h
		w.Pool.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(3))
		w.Pool.Spec.Management.Replace.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		in, oldUD, newUD, _ := halfwayThroughAVersionRollout(t, w)
		in.Now = t0.Add(10 * time.Minute)
		oldV := in.UserData[oldUD].Version
		in.Machines = []MachineHealth{onOld("a", oldUD, oldV), onOld("b", oldUD, oldV), {Name: "c1", UserData: newUD.Name, Version: newUD.Version,
			Created: t0.Add(time.Minute), Node: "c1", Healthy: true, HealthySince: t0.Add(2 * time.Minute)}}
		p := Decide(in)
		md := p.MachineDeployment
		if md == nil || md.MaxSurge == nil || *md.MaxSurge != intstr.FromInt32(1) || md.MaxUnavailable == nil || *md.MaxUnavailable != intstr.FromInt32(0) {
			t.Fatalf("MachineDeployment target %+v, want maxSurge 1 and maxUnavailable 0 during the canary", md)
		}
		in.Now = t0.Add(40 * time.Minute) // the canary soaked
		p = Decide(in)
		if p.Decision.Health.Phase == HealthCanary || p.MachineDeployment.MaxSurge != nil || p.MachineDeployment.MaxUnavailable != nil {
			t.Errorf("phase %s, surge %v / unavailable %v: want the spec's limits once the canary passed",
				p.Decision.Health.Phase, p.MachineDeployment.MaxSurge, p.MachineDeployment.MaxUnavailable)
		}
	})
}

// Issue 29, point 3: the halt is recorded on the pool and holds once the
// failed canary is gone, until a person resumes.
func TestAHaltOutlivesTheFailedMachine(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: time.Minute},
		ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}}
	in, oldUD, newUD, started := halfwayThroughAVersionRollout(t, w)
	healthy := in.Tokens[secrets.TokenSecretName(in.Pool.Name, in.UserData[oldUD].RolloutHash)].PayloadHash
	if healthy == started.PayloadHash {
		t.Fatal("fixture: the rollout must change the payload")
	}
	in.Now = t0.Add(10 * time.Minute)
	in.Current = &CurrentRollout{Revision: 2} // the rollout's record keeps its state
	oldV := in.UserData[oldUD].Version
	in.Machines = []MachineHealth{onOld("a", oldUD, oldV), onOld("b", oldUD, oldV), onOld("c", oldUD, oldV),
		{Name: "n1", UserData: newUD.Name, Version: newUD.Version, Created: t0.Add(time.Minute), Node: "n1", Signal: "Ready=False",
			Gate: &Gate{Status: false, Reason: nodepoolv1.GateReasonFailed, Message: "node n1 turned unhealthy"}}}
	p := Decide(in)
	if p.Decision.Health.Phase != HealthHalted {
		t.Fatalf("phase %s, want Halted", p.Decision.Health.Phase)
	}
	halted := p.RecordState[nodepoolv1.AnnotationHalted]
	if want := newUD.RolloutHash + "/" + started.PayloadHash + "/n1"; halted != want {
		t.Fatalf("halted annotation %q, want %q", halted, want)
	}
	if p.Decision.TokenPayload != healthy || targetToken(t, p).PayloadHash != healthy {
		t.Errorf("a halted pool's new machines boot %s, want the last healthy payload %s", p.Decision.TokenPayload, healthy)
	}

	// Auto repair deletes the failed canary; its replacement soaks.
	in.Pool.Annotations[nodepoolv1.AnnotationHalted] = halted
	in.Pool.Status.Conditions = []metav1.Condition{cond(p, nodepoolv1.ConditionRolloutHealthy)}
	in.Tokens[started.Name] = Token{Name: started.Name, RolloutHash: newUD.RolloutHash, PayloadHash: healthy, RotatedAt: t0, Created: t0}
	in.Machines[3] = MachineHealth{Name: "n2", UserData: newUD.Name, Version: newUD.Version, Created: t0.Add(2 * time.Minute), Node: "n2",
		Healthy: true, HealthySince: t0.Add(3 * time.Minute)}
	p = Decide(in)
	if h := p.Decision.Health; h.Phase != HealthHalted || h.Machine != "n1" {
		t.Errorf("health %+v, want still Halted on n1", h)
	}
	if g := gatesOf(p)["n2"]; g != "False/Halted" {
		t.Errorf("gate of the replacement %q, want False/Halted", g)
	}
	if p.Decision.TokenPayload != healthy {
		t.Errorf("the replacement boots %s, want the last healthy payload %s", p.Decision.TokenPayload, healthy)
	}
	if c := cond(p, nodepoolv1.ConditionRolloutHealthy); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "n1") {
		t.Errorf("RolloutHealthy %+v, want False naming n1", c)
	}
	if hasEvent(p, nodepoolv1.ReasonRolloutHalted) {
		t.Error("the recorded halt is said again once its machine is gone")
	}

	// A person resumes: the annotation goes, the rollout goes on with
	// its own payload.
	delete(in.Pool.Annotations, nodepoolv1.AnnotationHalted)
	p = Decide(in)
	if h := p.Decision.Health; h.Phase == HealthHalted {
		t.Errorf("health %+v after resume, want not Halted", h)
	}
	if p.Decision.TokenPayload != started.PayloadHash {
		t.Errorf("after resume the token serves %s, want the rollout's payload %s", p.Decision.TokenPayload, started.PayloadHash)
	}

	// The owner changes the pool: the halt of the older rollout no longer holds.
	in.Pool.Annotations[nodepoolv1.AnnotationHalted] = halted
	if haltHolds(in, &UserData{RolloutHash: "other"}) != nil {
		t.Error("a halt holds a rollout it was not recorded for")
	}
}

// Issue 29, point 4: a forced rollout that fails its gate (here with
// failurePolicy Rollback) halts, and its new machines boot what the
// machines ran before the force.
func TestAFailedForcedRolloutBootsTheLastHealthyPayload(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: time.Minute},
		ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}, FailurePolicy: nodepoolv1.FailurePolicyRollback}
	in := settled(t, w)
	before := in.Latest.Hash
	bumpProxyImage(w)
	in = relatest(t, in, w)
	in.Current = &CurrentRollout{Revision: 2} // the rollout's record keeps its state
	at := t0.Add(-time.Minute)
	in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = at.Format(time.RFC3339)
	p := Decide(in)
	if p.Decision.Action != ActionForce {
		t.Fatalf("action %s, want Force", p.Decision.Action)
	}
	if got, want := p.RecordState[nodepoolv1.AnnotationForcedFrom], in.Hashes.Rollout+"/"+before+"/"+in.Latest.Hash; got != want {
		t.Fatalf("forced-from annotation %q, want %q", got, want)
	}
	if md := p.MachineDeployment; md.MaxSurge == nil || *md.MaxSurge != intstr.FromInt32(1) {
		t.Errorf("a forced rollout starts with maxSurge %v, want the canary's 1", md.MaxSurge)
	}
	// The controller applied it; Cluster API made a machine that never
	// gets a healthy node.
	in.Pool.Annotations[nodepoolv1.AnnotationForcedFrom] = p.RecordState[nodepoolv1.AnnotationForcedFrom]
	tok := targetToken(t, p)
	in.Tokens[tok.Name] = Token{Name: tok.Name, RolloutHash: tok.RolloutHash, PayloadHash: tok.PayloadHash, RotatedAt: t0, Created: t0}
	in.Payloads[in.Latest.Hash] = in.Latest
	in.MachineDeployment.RolloutAfter = &at
	in.MachineDeployment.MachinesBeforeRolloutAfter = 3
	in.MachineDeployment.Complete = false
	in.MachineDeployment.MachinesCreated = append(in.MachineDeployment.MachinesCreated, t0.Add(time.Minute))
	ud := in.MachineDeployment.DataSecretName
	v := in.MachineDeployment.Version
	in.Machines = []MachineHealth{onOld("a", ud, v), onOld("b", ud, v), onOld("c", ud, v),
		{Name: "n1", UserData: ud, Version: v, Created: t0.Add(time.Minute), Signal: "no node yet"}}
	in.Now = t0.Add(10 * time.Minute)
	p = Decide(in)
	if h := p.Decision.Health; h.Phase != HealthHalted || h.Machine != "n1" {
		t.Fatalf("health %+v, want Halted on n1", h)
	}
	if p.Decision.TokenPayload != before || targetToken(t, p).PayloadHash != before {
		t.Errorf("a failed forced rollout's new machines boot %s, want the payload before the force %s", p.Decision.TokenPayload, before)
	}
	if p.RecordState[nodepoolv1.AnnotationHalted] == "" {
		t.Error("the halt is not recorded")
	}
	for _, name := range p.Delete {
		if name == secrets.PayloadSecretName(in.Pool.Name, before) {
			t.Error("the last healthy payload is deleted while it is the rollback target")
		}
	}
}

// Issue 28: the rollback is part of the decision, not a later edit.
func TestTheRollbackIsPartOfTheDecision(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.Health = &nodepoolv1.Health{CanarySoak: &metav1.Duration{Duration: time.Minute},
		ProgressDeadline: &metav1.Duration{Duration: 5 * time.Minute}, FailurePolicy: nodepoolv1.FailurePolicyRollback}
	in, oldUD, newUD, _ := halfwayThroughAVersionRollout(t, w)
	in.Now = t0.Add(10 * time.Minute)
	oldV := in.UserData[oldUD].Version
	in.Machines = []MachineHealth{onOld("a", oldUD, oldV), {Name: "n1", UserData: newUD.Name, Version: newUD.Version, Created: t0.Add(time.Minute)}}
	d, _, _ := decide(in, runningUserData(in))
	if d.Health == nil || d.Health.Phase != HealthRollingBack || d.Target == nil || d.Target.Name != oldUD ||
		d.RollbackFrom == nil || d.RollbackFrom.Name != newUD.Name {
		t.Errorf("decision target %+v, rollback from %+v, health %+v: want the rollback decided", d.Target, d.RollbackFrom, d.Health)
	}
}
