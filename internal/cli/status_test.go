package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
	"nodepool.dev/nodepool/internal/secrets"
)

// settledInput is the engine's input for a pool whose 3 machines run the
// payload of the world as it is.
func settledInput(t *testing.T, w *inputstest.World, now time.Time) rollout.Input {
	t.Helper()
	pl, h, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	pool := w.Pool.DeepCopy()
	pool.Generation, pool.Status.ObservedGeneration = 2, 2
	ud := rollout.UserData{Name: secrets.UserDataSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout,
		RolloutWithoutVersion: h.RolloutWithoutVersion, Version: pool.Spec.Release.Version, PayloadHash: pl.Hash}
	tok := rollout.Token{Name: secrets.TokenSecretName(pool.Name, h.Rollout), RolloutHash: h.Rollout, PayloadHash: pl.Hash, RotatedAt: now}
	pool.Annotations = map[string]string{nodepoolv1.AnnotationCurrentRolloutConfig: h.RolloutWithoutVersion, nodepoolv1.AnnotationCurrentPayload: pl.Hash}
	pool.Status.Version, pool.Status.Replicas, pool.Status.ReadyReplicas, pool.Status.UpdatedReplicas = pool.Spec.Release.Version, 3, 3, 3
	created := now.Add(-time.Hour)
	return rollout.Input{Pool: pool, Now: now, Latest: pl, Hashes: h,
		MachineDeployment: &rollout.MachineDeployment{DataSecretName: ud.Name, Version: ud.Version, Complete: true,
			Replicas: 3, ReadyReplicas: 3, UpToDateReplicas: 3, MachinesCreated: []time.Time{created, created, created}},
		UserData: map[string]rollout.UserData{ud.Name: ud}, Tokens: map[string]rollout.Token{tok.Name: tok},
		Payloads: map[string]*payload.Payload{pl.Hash: pl}, Referenced: map[string]bool{ud.Name: true}}
}

// `rollout status` once read the pause from the last reconcile's
// conditions: with pausedUntil expired and apply-pending due, the engine
// starts the rollout while status said Paused.
func TestStatusOfAnExpiredPauseWithADueApplyPendingIsStarting(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	in.Pool.Spec.Management.PausedUntil = now.Add(-time.Second).Format(time.RFC3339)
	in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = now.Add(-2 * time.Second).Format(time.RFC3339)
	in.Pool.Status.Conditions = []metav1.Condition{{Type: nodepoolv1.ConditionUpdatingConfig, Status: metav1.ConditionFalse,
		Reason: nodepoolv1.ReasonPaused, Message: "a forced rollout (platform) is pending; the pool is paused"}}
	plan := rollout.Decide(in)
	if plan.Decision.Action != rollout.ActionForce {
		t.Fatalf("engine decides %s, want Force", plan.Decision.Action)
	}
	if st := statusOf(in.Pool, plan, now); st.Phase != PhaseStarting {
		t.Errorf("status %s (%s), want %s: the engine starts the rollout now", st.Phase, st.Message, PhaseStarting)
	}
}

// `rollout status` once said Starting for 30 s after a restart no machine
// is older than, which the engine knows replaces nothing.
func TestStatusOfARestartThatReplacesNothingIsComplete(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	early := metav1.NewTime(now.Add(-2 * time.Hour))
	in.Pool.Spec.Management.RolloutAfter = &early
	if st := statusOf(in.Pool, rollout.Decide(in), now); st.Phase != PhaseComplete {
		t.Errorf("status %s (%s), want %s", st.Phase, st.Message, PhaseComplete)
	}
}

// The fleet view once took status.replicas as an autoscaled pool's desired
// count whatever its bounds; the controller clamps it into them.
func TestFleetDesiredOfAnAutoscaledPoolIsWithinItsBounds(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Replicas = nil
	w.Pool.Spec.AutoScaling = &nodepoolv1.AutoScaling{Min: 1, Max: 3}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, w, now)
	in.Pool.Status.Replicas = 5
	five := int32(5)
	in.MachineDeployment.SpecReplicas = &five
	engine := rollout.Decide(in).Decision.Replicas
	rows := fleetRows(now, []nodepoolv1.NodePool{*in.Pool}, false)
	if len(rows) != 1 || rows[0].Desired != engine || engine != 3 {
		t.Errorf("fleet desired %+v, engine %d: want both 3", rows, engine)
	}
}

// `rollout status` says Failed for a pool whose inputs do not render from
// the engine's standing (Invalid, naming the validity condition), not from
// conditions of its own reading: the pool's status here has none.
func TestStatusOfAPoolWhoseInputsDoNotRenderIsFailedFromItsStanding(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	in.RenderErr, in.Latest = errors.New("the ignition fragment does not parse"), nil
	in.Pool.Status.Conditions = nil
	plan := rollout.Decide(in)
	if plan.Decision.Standing.Phase != rollout.PhaseInvalid {
		t.Fatalf("standing %s, want Invalid", plan.Decision.Standing.Phase)
	}
	st := statusOf(in.Pool, plan, now)
	if st.Phase != PhaseFailed || !strings.Contains(st.Message, "ValidGeneratedPayload is False (InvalidPayload): the ignition fragment does not parse") {
		t.Errorf("status %s (%s), want Failed naming ValidGeneratedPayload and the error", st.Phase, st.Message)
	}
	in.Pool.Status.Rollout = plan.Decision.Standing.Published() // as the controller publishes it
	if again := statusOf(in.Pool, plan, now); again.Phase != PhaseFailed || again.Message != st.Message {
		t.Errorf("status from status.rollout %s (%s), want %s (%s)", again.Phase, again.Message, st.Phase, st.Message)
	}
}

// `rollout status` once said Complete right after `rollout restart` under
// load: the controller had started the rollout (the MachineDeployment
// replacing machines) but its status patch, the last step of its
// reconcile, had not landed, so status.rollout still said settled. A pool
// is Complete only when the published standing and the engine's, on what
// the command reads now, both say so.
func TestStatusOfARolloutStartedBeforeItsStatusIsPublishedIsNotComplete(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	in := settledInput(t, inputstest.New(), now)
	in.Pool.Status.Rollout = rollout.Decide(in).Decision.Standing.Published()
	if !in.Pool.Status.Rollout.Settled {
		t.Fatal("the settled pool's published standing is not settled")
	}
	md := in.MachineDeployment
	md.Complete, md.UpToDateReplicas, md.Replicas = false, 1, 4
	md.MachinesCreated = append(md.MachinesCreated, now)
	plan := rollout.Decide(in)
	if plan.Decision.Standing.Settled {
		t.Fatalf("the engine says settled with %d of 3 machines up to date", md.UpToDateReplicas)
	}
	if st := statusOf(in.Pool, plan, now); st.Phase == PhaseComplete {
		t.Errorf("status %s (%s) while the MachineDeployment replaces machines", st.Phase, st.Message)
	}
}

// `rollout status` names the current rollout's revision in the pool's
// history, and who started it: the rollout in progress, or, when none is,
// the one the machines run (with its outcome while a rollout without a
// record yet waits); -o json/yaml carry it as revision.
func TestStatusNamesTheCurrentRolloutsRevision(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	record := func(rev int64, initiator, outcome string) history.Entry {
		return history.Entry{Revision: rev, Initiator: initiator, Outcome: outcome, Started: now.Add(-time.Duration(10-rev) * time.Hour)}
	}
	done := []history.Entry{record(1, "spec", history.OutcomeComplete), record(2, "restart", history.OutcomeComplete)}
	for _, tc := range []struct {
		name    string
		entries []history.Entry
		edit    func(in *rollout.Input)
		phase   string
		line    string // the line starts with it
		json    string // -o json holds it ("" without a revision)
	}{
		{name: "a rollout in progress", entries: append(done, record(3, "spec", history.OutcomeInProgress)), edit: func(in *rollout.Input) {
			in.Pool.Status.Updating, in.Pool.Status.UpdatedReplicas = "Config", 1
			md := in.MachineDeployment
			md.Complete, md.UpToDateReplicas, md.Replicas = false, 1, 4
		}, phase: PhaseRollingOut, line: `Waiting for nodepool "workers" rollout to finish: revision 3 (spec): 1 of 3 machines up to date`,
			json: `"revision":{"revision":3,"initiator":"spec","outcome":"InProgress","started":"2026-12-01T05:00:00Z"}`},
		{name: "a health gate's rollback", entries: append(done, record(3, "spec", history.OutcomeFailed), history.Entry{Revision: 4, Initiator: "rollback", RollbackOf: 3, Outcome: history.OutcomeInProgress, Started: now}),
			edit:  func(in *rollout.Input) { in.Pool.Status.Updating = "Config"; in.MachineDeployment.Complete = false },
			phase: PhaseRollingOut, line: `Waiting for nodepool "workers" rollout to finish: revision 4 (rollback of 3): `, json: `"rollbackOf":3`},
		{name: "settled", entries: done, phase: PhaseComplete,
			line: `nodepool "workers" successfully rolled out: revision 2 (restart), 3 of 3 machines up to date and ready`, json: `"revision":{"revision":2,"initiator":"restart","outcome":"Complete"`},
		{name: "a rollout the pause holds", entries: done, edit: func(in *rollout.Input) {
			in.Pool.Spec.Management.PausedUntil = "true"
			in.Pool.Annotations[nodepoolv1.AnnotationApplyPending] = now.Add(-time.Minute).Format(time.RFC3339)
		}, phase: PhasePaused, line: `Waiting for nodepool "workers" rollout to finish: revision 2 (restart, Complete): 3 of 3 machines up to date, 3 ready (Paused: `,
			json: `"revision":{"revision":2,"initiator":"restart","outcome":"Complete"`},
		{name: "no record", phase: PhaseComplete, line: `nodepool "workers" successfully rolled out: 3 of 3 machines up to date and ready`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := settledInput(t, inputstest.New(), now)
			in.Pool.Name = "workers"
			if tc.edit != nil {
				tc.edit(&in)
			}
			st := statusOf(in.Pool, rollout.Decide(in), now)
			st.Revision = currentRevision(tc.entries)
			if st.Phase != tc.phase || !strings.HasPrefix(st.line(), tc.line) {
				t.Errorf("status %s: %s\nwant %s: %s...", st.Phase, st.line(), tc.phase, tc.line)
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if tc.json == "" && strings.Contains(string(b), `"revision"`) || tc.json != "" && !strings.Contains(string(b), tc.json) {
				t.Errorf("-o json %s, want %s", b, or(tc.json, "no revision"))
			}
		})
	}
}

// The revision is read from the pool's records as `rollout history` reads
// them: a ControllerRevision status.revisions does not list is not the
// pool's, however new.
func TestStatusReadsTheRevisionFromThePoolsRecords(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pool := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "workers", UID: "pool-uid"}}
	var objs []client.Object
	for i, initiator := range []string{"spec", "version", "spec"} {
		rev := int64(i + 1)
		cr, err := history.New(pool.Namespace, pool.Name, history.Entry{Revision: rev, Initiator: initiator, Started: now.Add(time.Duration(i) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		cr.UID = types.UID(fmt.Sprintf("r%d", rev))
		if err := controllerutil.SetControllerReference(pool, cr, scheme); err != nil {
			t.Fatal(err)
		}
		if rev < 3 {
			cr.Annotations[history.AnnotationOutcome] = history.OutcomeComplete
			pool.Status.Revisions = append(pool.Status.Revisions, nodepoolv1.RevisionReference{Revision: rev, UID: cr.UID})
		}
		objs = append(objs, cr)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	got := statusRevision(context.Background(), c, pool)
	if got == nil || got.Revision != 2 || got.Initiator != "version" || got.Outcome != history.OutcomeComplete {
		t.Errorf("revision %+v, want 2 (version, Complete): revision 3 is not listed in status.revisions", got)
	}
	if none := statusRevision(context.Background(), fake.NewClientBuilder().WithScheme(scheme).Build(), pool); none != nil {
		t.Errorf("revision %+v without records, want none", none)
	}
}
