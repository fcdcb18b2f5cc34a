package observe_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/observe"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/rollout"
)

func TestLatestRendersTheCurrentInputs(t *testing.T) {
	w := inputstest.New()
	want, hashes, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatal(err)
	}
	var in rollout.Input
	gathered, err := observe.Latest(context.Background(), w.Client(), w.Pool, w.Settings, &in)
	if err != nil || gathered == nil || in.RenderErr != nil {
		t.Fatalf("Latest: %v, %v, %v", gathered, err, in.RenderErr)
	}
	if in.Latest.Hash != want.Hash || in.Hashes != hashes || in.TemplateName == "" {
		t.Errorf("Latest gave payload %s, hashes %+v, template %q; Render gives %s, %+v", in.Latest.Hash, in.Hashes, in.TemplateName, want.Hash, hashes)
	}

	// A missing ConfigMap is the pool's problem, not an error.
	w.UserConfigs = w.UserConfigs[:1]
	in = rollout.Input{}
	gathered, err = observe.Latest(context.Background(), w.Client(), w.Pool, w.Settings, &in)
	if err != nil || gathered != nil || in.Latest != nil || inputs.Reason(in.RenderErr) == "" {
		t.Errorf("with a missing ConfigMap: gathered %v, err %v, latest %v, render error %v", gathered, err, in.Latest, in.RenderErr)
	}
}

func TestSummarizeFindsWhatTheMachinesRun(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	md := &clusterv1.MachineDeployment{}
	md.Generation = 2
	md.Spec.Replicas = ptr.To[int32](3)
	md.Spec.Template.Spec.Version = "v1.36.4"
	md.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("workers-userdata-new")
	md.Status.ObservedGeneration = 2
	md.Status.Replicas, md.Status.ReadyReplicas, md.Status.UpToDateReplicas = ptr.To[int32](3), ptr.To[int32](3), ptr.To[int32](1)
	set := func(name, data, version string, created time.Time, replicas int32) clusterv1.MachineSet {
		ms := clusterv1.MachineSet{}
		ms.Name, ms.CreationTimestamp = name, metav1.NewTime(created)
		ms.Spec.Replicas, ms.Status.Replicas = ptr.To(replicas), ptr.To(replicas)
		ms.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(data)
		ms.Spec.Template.Spec.Version = version
		return ms
	}
	sets := []clusterv1.MachineSet{
		set("new", "workers-userdata-new", "v1.36.4", t0, 1),
		set("old", "workers-userdata-old", "v1.36.3", t0.Add(-time.Hour), 2),
		set("gone", "workers-userdata-older", "v1.36.2", t0.Add(-2*time.Hour), 0),
	}
	got := observe.Summarize(md, sets, nil)
	if got.DataSecretName != "workers-userdata-new" || got.RunningDataSecretName != "workers-userdata-old" || got.Complete || got.UpToDateReplicas != 1 {
		t.Errorf("mid-rollout: %+v", got)
	}
	md.Status.UpToDateReplicas = ptr.To[int32](3)
	if got := observe.Summarize(md, sets[:1], nil); !got.Complete || got.RunningDataSecretName != "workers-userdata-new" {
		t.Errorf("complete: %+v", got)
	}
}

// The engine reads the pool's current rollout from its newest record of
// the controller's own: what rollout it is, when it started, whether it
// still runs and whether it was forced, and what the engine keeps on it.
func TestTheCurrentRolloutIsItsNewestRecordOfTheControllers(t *testing.T) {
	started := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	forcedAt := started.Add(time.Minute)
	mk := func(e history.Entry, outcome string, state map[string]string) appsv1.ControllerRevision {
		cr, err := history.New("ns", "workers", e)
		if err != nil {
			t.Fatal(err)
		}
		cr.Annotations[history.AnnotationOutcome] = outcome
		for k, v := range state {
			cr.Annotations[k] = v
		}
		return *cr
	}
	records := []appsv1.ControllerRevision{
		mk(history.Entry{Revision: 1, RolloutHash: "a", Started: started.Add(-time.Hour)}, history.OutcomeComplete, nil),
		mk(history.Entry{Revision: 2, RolloutHash: "b", Started: started, ForcedAt: &forcedAt}, history.OutcomeInProgress,
			map[string]string{nodepoolv1.AnnotationHalted: "b/p/m"}),
		mk(history.Entry{Revision: 3, Initiator: history.InitiatorExternal, Started: started.Add(time.Hour)}, history.OutcomeReverted, nil),
	}
	cur := observe.CurrentRollout(records)
	if cur == nil || cur.Revision != 2 || cur.RolloutHash != "b" || !cur.Started.Equal(started) || !cur.InProgress || !cur.Forced ||
		cur.State[nodepoolv1.AnnotationHalted] != "b/p/m" {
		t.Errorf("current rollout %+v, want revision 2 (b, started %s, in progress, forced, halted)", cur, started)
	}
	records[1].Annotations[history.AnnotationOutcome] = history.OutcomeSuperseded
	if cur := observe.CurrentRollout(records); cur == nil || cur.InProgress {
		t.Errorf("a superseded record is in progress: %+v", cur)
	}
	if cur := observe.CurrentRollout(nil); cur != nil {
		t.Errorf("no records, current %+v", cur)
	}
}
