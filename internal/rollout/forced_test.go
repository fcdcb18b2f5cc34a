package rollout

import (
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
)

func bumpProxyImage(w *inputstest.World) {
	w.Management.Data[inputs.ManagementConfigKey] = strings.Replace(w.Management.Data[inputs.ManagementConfigKey], "sha256:aaaa", "sha256:eeee", 1)
}

func TestForcedRollouts(t *testing.T) {
	past := metav1.NewTime(t0.Add(-time.Minute))
	future := metav1.NewTime(t0.Add(time.Hour))
	for _, tc := range []struct {
		name      string
		setup     func(w *inputstest.World, in *Input)
		forced    bool
		initiator Initiator
		check     func(t *testing.T, p Plan)
	}{
		{name: "rolloutAfter in the past replaces every machine, on the latest payload", forced: true, initiator: InitiatorRestart,
			setup: func(w *inputstest.World, in *Input) { w.Pool.Spec.Management.RolloutAfter = &past }},
		{name: "rolloutAfter in the future waits, says so and wakes up then",
			setup: func(w *inputstest.World, in *Input) { w.Pool.Spec.Management.RolloutAfter = &future },
			check: func(t *testing.T, p Plan) {
				c := cond(p, nodepoolv1.ConditionUpdatingConfig)
				if c.Reason != nodepoolv1.ReasonRolloutScheduled || !strings.Contains(c.Message, "2026-11-30T13:00:00Z") {
					t.Errorf("UpdatingConfig = %+v, want RolloutScheduled with the time", c)
				}
				if p.RequeueAfter == 0 || p.RequeueAfter > time.Hour+time.Second {
					t.Errorf("requeue after %v, want at rolloutAfter", p.RequeueAfter)
				}
			}},
		{name: "a forced rollout already applied does not repeat",
			setup: func(w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.RolloutAfter = &past
				at := past.Time
				in.MachineDeployment.RolloutAfter = &at
			},
			check: func(t *testing.T, p Plan) {
				if p.MachineDeployment.RolloutAfter == nil || !p.MachineDeployment.RolloutAfter.Equal(past.Time) {
					t.Error("the MachineDeployment's rollout.after must be kept")
				}
			}},
		{name: "a paused pool defers a forced rollout",
			setup: func(w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.RolloutAfter = &past
				w.Pool.Spec.Management.PausedUntil = "true"
			},
			check: func(t *testing.T, p Plan) {
				if c := cond(p, nodepoolv1.ConditionUpdatingConfig); c.Reason != nodepoolv1.ReasonPaused {
					t.Errorf("UpdatingConfig = %+v, want reason Paused", c)
				}
			}},
		{name: "a paused pool holds a restart due later, not shows it scheduled",
			setup: func(w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.RolloutAfter = &future
				w.Pool.Spec.Management.PausedUntil = "true"
			},
			check: func(t *testing.T, p Plan) {
				if c := cond(p, nodepoolv1.ConditionUpdatingConfig); c.Reason != nodepoolv1.ReasonPaused || !strings.Contains(c.Message, "forced rollout (restart") {
					t.Errorf("UpdatingConfig = %+v, want reason Paused naming the restart", c)
				}
			}},
		{name: "apply-pending is a forced rollout initiated by the platform", forced: true, initiator: InitiatorPlatform,
			setup: func(w *inputstest.World, in *Input) {
				bumpProxyImage(w)
				w.Pool.Annotations = map[string]string{nodepoolv1.AnnotationApplyPending: t0.Add(-time.Second).Format(time.RFC3339)}
			},
			check: func(t *testing.T, p Plan) {
				if p.Record == nil || len(p.Record.Changed) != 1 || p.Record.Changed[0] != "apiserver-proxy" {
					t.Errorf("record = %+v, want the changed component apiserver-proxy", p.Record)
				}
			}},
		{name: "apply-pending held by the pause names the component it changes, with no record yet",
			setup: func(w *inputstest.World, in *Input) {
				bumpProxyImage(w)
				w.Pool.Annotations = map[string]string{nodepoolv1.AnnotationApplyPending: t0.Add(-time.Second).Format(time.RFC3339)}
				w.Pool.Spec.Management.PausedUntil = "true"
			},
			check: func(t *testing.T, p Plan) {
				if p.Decision.Action != ActionDefer || p.Record != nil {
					t.Fatalf("action %s, record %+v: want a Defer with nothing recorded", p.Decision.Action, p.Record)
				}
				if c := p.Decision.Components; len(c) != 1 || c[0] != "apiserver-proxy" {
					t.Errorf("components %v, want apiserver-proxy: the payload the machines run against the latest", c)
				}
			}},
		{name: "the Rollout policy rolls management drift", forced: true, initiator: InitiatorPolicy,
			setup: func(w *inputstest.World, in *Input) {
				bumpProxyImage(w)
				w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
			}},
		{name: "a rolloutAfter earlier than every machine replaces nothing and applies no drift",
			setup: func(w *inputstest.World, in *Input) {
				bumpProxyImage(w)
				early := metav1.NewTime(t0.Add(-2 * time.Hour))
				w.Pool.Spec.Management.RolloutAfter = &early
			},
			check: func(t *testing.T, p Plan) {
				if hasEvent(p, "RolloutForced") || len(p.Payloads) != 0 {
					t.Errorf("a forced rollout that replaces nothing must not be announced nor store the latest payload: events %+v, %d payloads", p.Events, len(p.Payloads))
				}
				if p.MachineDeployment.RolloutAfter != nil {
					t.Errorf("rollout.after = %v, want none written", p.MachineDeployment.RolloutAfter)
				}
			}},
		{name: "a zero rolloutAfter is a no-op, not a rollout on every reconcile",
			setup: func(w *inputstest.World, in *Input) {
				zero := metav1.Time{}
				w.Pool.Spec.Management.RolloutAfter = &zero
			},
			check: func(t *testing.T, p Plan) {
				if hasEvent(p, "RolloutForced") || p.Updating != "" {
					t.Errorf("zero rolloutAfter: events %+v, updating %q", p.Events, p.Updating)
				}
			}},
		{name: "apply-pending written by a fleet rollout is initiated by that fleet rollout", forced: true, initiator: Initiator(nodepoolv1.FleetRolloutInitiator("proxy-fix")),
			setup: func(w *inputstest.World, in *Input) {
				bumpProxyImage(w)
				w.Pool.Annotations = map[string]string{nodepoolv1.AnnotationApplyPending: t0.Add(-time.Second).Format(time.RFC3339), nodepoolv1.AnnotationFleetRollout: "proxy-fix"}
			},
			check: func(t *testing.T, p Plan) {
				if p.Record == nil || p.Record.Initiator.FleetRollout() != "proxy-fix" || !p.Record.Initiator.Platform() {
					t.Errorf("record = %+v, want initiator fleetrollout/proxy-fix", p.Record)
				}
			}},
		{name: "apply-pending acts now although a later rolloutAfter is scheduled", forced: true, initiator: InitiatorPlatform,
			setup: func(w *inputstest.World, in *Input) {
				bumpProxyImage(w)
				w.Pool.Spec.Management.RolloutAfter = &future
				w.Pool.Annotations = map[string]string{nodepoolv1.AnnotationApplyPending: t0.Add(-time.Second).Format(time.RFC3339)}
			}},
		{name: "a scheduled rolloutAfter still waits for its time once apply-pending is applied",
			setup: func(w *inputstest.World, in *Input) {
				w.Pool.Spec.Management.RolloutAfter = &future
				applied := t0.Add(-time.Second).Truncate(time.Second)
				w.Pool.Annotations = map[string]string{nodepoolv1.AnnotationApplyPending: applied.Format(time.RFC3339)}
				in.MachineDeployment.RolloutAfter = &applied
			},
			check: func(t *testing.T, p Plan) {
				if c := cond(p, nodepoolv1.ConditionUpdatingConfig); c.Reason != nodepoolv1.ReasonRolloutScheduled {
					t.Errorf("UpdatingConfig = %+v, want RolloutScheduled", c)
				}
			}},
		{name: "the OnNextRollout policy does not roll management drift",
			setup: func(w *inputstest.World, in *Input) { bumpProxyImage(w) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := inputstest.New()
			in := settled(t, w)
			old := in.MachineDeployment.DataSecretName
			tc.setup(w, &in)
			annotations := w.Pool.Annotations
			in = relatest(t, in, w)
			for k, v := range annotations {
				in.Pool.Annotations[k] = v
			}
			p := Decide(in)
			if p.MachineDeployment.DataSecretName != old {
				t.Fatal("a forced rollout keeps the user-data name (same owner intent)")
			}
			forced := p.Record != nil && p.Record.ForcedAt != nil
			if forced != tc.forced {
				t.Fatalf("forced = %v, want %v (record %+v)", forced, tc.forced, p.Record)
			}
			if tc.forced {
				if p.Record.Initiator != tc.initiator {
					t.Errorf("initiator %s, want %s", p.Record.Initiator, tc.initiator)
				}
				if p.MachineDeployment.RolloutAfter == nil {
					t.Error("rollout.after not set on the MachineDeployment")
				}
				if tok := targetToken(t, p); tok.PayloadHash != in.Latest.Hash {
					t.Error("a forced rollout must point the token at the latest payload first")
				}
				if p.Updating != "Forced" {
					t.Errorf("status.updating = %q, want Forced", p.Updating)
				}
			}
			if tc.check != nil {
				tc.check(t, p)
			}
		})
	}
}

func TestTheRolloutPolicyReplacesMachinesMadeInTheSecondTheDriftWasSeen(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesRollout
	in := settled(t, w)
	in.MachineDeployment.MachinesCreated = []time.Time{t0, t0}
	bumpProxyImage(w)
	in = relatest(t, in, w)
	in.Now = t0.Add(500 * time.Millisecond)
	p := Decide(in)
	if p.Record != nil {
		t.Fatalf("forced at once at %v: Cluster API would keep machines made in that second", p.Record.ForcedAt)
	}
	if c := cond(p, nodepoolv1.ConditionUpdatingConfig); c.Reason != nodepoolv1.ReasonRolloutScheduled {
		t.Errorf("UpdatingConfig = %+v, want the policy rollout scheduled for the next second", c)
	}
	in.Pool.Status.PendingManagementChanges = p.Pending
	in.Now = t0.Add(time.Second)
	p = Decide(in)
	if p.Record == nil || p.Record.Initiator != InitiatorPolicy || p.Record.ForcedAt == nil || !p.Record.ForcedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("record %+v, want a policy rollout forced at %v", p.Record, t0.Add(time.Second))
	}
}

// A forced rollout rewrites its user-data (the payload its rollout now
// started with) after its MachineDeployment. When that write is lost (the
// reconcile stopped after the MachineDeployment: a conflict, an API error,
// a restart), the user-data still names the payload before it, and once
// the machines are replaced the token went back to it and the drift the
// rollout applied read as pending. The forced rollout's record says what
// it boots: the user-data is written again from it, and the token keeps
// serving it.
func TestAForcedRolloutWhoseUserDataRewriteWasLostIsReadFromItsRecord(t *testing.T) {
	w := inputstest.New()
	in := settled(t, w)
	old := in.Latest.Hash
	bumpProxyImage(w)
	in = relatest(t, in, w)
	in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = t0.Add(-time.Second).Format(time.RFC3339)
	p := Decide(in)
	if p.Record == nil || p.Record.ForcedAt == nil {
		t.Fatalf("no forced rollout: %+v", p.Decision)
	}
	latest := in.Latest.Hash
	tok := targetToken(t, p)

	// What the API server holds after a reconcile that wrote the record,
	// the token and the MachineDeployment, and then stopped; Cluster API
	// has replaced the machines since.
	next := in
	next.Now = t0.Add(10 * time.Minute)
	next.Tokens = maps.Clone(in.Tokens)
	tk := next.Tokens[tok.Name]
	tk.PayloadHash = tok.PayloadHash
	next.Tokens[tok.Name] = tk
	next.Payloads = maps.Clone(in.Payloads)
	for _, pl := range p.Payloads {
		next.Payloads[pl.Hash] = pl
	}
	md := *in.MachineDeployment
	md.RolloutAfter = p.MachineDeployment.RolloutAfter
	md.MachinesCreated = []time.Time{t0.Add(time.Minute), t0.Add(time.Minute), t0.Add(time.Minute)}
	next.MachineDeployment = &md
	next.Nodes = []Node{{Name: "n2", Payload: payload.Short(latest), Ready: true}}
	next.Current = &CurrentRollout{Revision: 2, RolloutHash: p.Record.RolloutHash, Started: p.Record.Started, InProgress: true,
		Forced: true, ForcedAt: p.Record.ForcedAt, State: maps.Clone(p.RecordState)}
	if ud := next.UserData[md.DataSecretName]; ud.PayloadHash != old {
		t.Fatalf("the user-data as the lost write left it starts %s, want %s", payload.Short(ud.PayloadHash), payload.Short(old))
	}

	q := Decide(next)
	if got := targetToken(t, q); got.PayloadHash != latest {
		t.Errorf("the token serves %s once the machines are replaced, want the forced payload %s", payload.Short(got.PayloadHash), payload.Short(latest))
	}
	var written *UserDataAction
	for i := range q.UserData {
		if q.UserData[i].Name == md.DataSecretName {
			written = &q.UserData[i]
		}
	}
	if written == nil || written.PayloadHash != latest {
		t.Errorf("user-data written %+v, want it to start from the forced payload %s", written, payload.Short(latest))
	}
	if len(q.Pending) != 0 {
		t.Errorf("drift the forced rollout applied reads as pending: %+v", q.Pending)
	}
	if !hasEvent(q, nodepoolv1.EventUserDataRestored) {
		t.Errorf("events %+v, want UserDataRestored saying the user-data is written again", q.Events)
	}
	// Once written, nothing more is said.
	next.UserData = maps.Clone(next.UserData)
	next.UserData[written.Name] = written.UserData
	if r := Decide(next); hasEvent(r, nodepoolv1.EventUserDataRestored) {
		t.Errorf("UserDataRestored said again once the user-data starts from the forced payload: %+v", r.Events)
	}
}
