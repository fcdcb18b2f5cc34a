package observe_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

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
