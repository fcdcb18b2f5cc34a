package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/scenario"
	"nodepool.dev/nodepool/test/harness"
)

// StatusPatchesEnv is how many status patches BenchmarkNodePoolStatusPatch
// makes in each of its phases (default 2000).
const StatusPatchesEnv = "NODEPOOL_BENCH_STATUS_PATCHES"

// BenchmarkNodePoolStatusPatch measures, on the real API server, what a
// NodePool costs to store and to write: its stored size (compact JSON with
// managedFields, as etcd holds it) settled and mid-rollout, and the
// kube-apiserver's and etcd's CPU a status patch, for the status as the
// release before 2026-12-05 wrote it (status a granular structure: one
// managedFields entry a condition field; every condition with a message) and
// as this release writes it (status atomic: one managedFields entry for the
// whole status; normal-state conditions without a message), in one run.
// The statuses are the rollout engine's own, from the scenario engine's
// world: a pool of 3 settled, and the same pool mid-rollout. Each phase
// writes its patches as a bump and its undo do: the settled status, then the
// status with a drift row, alternately, over 100 pools. The last phase is an
// upgrade: the first phase's pools written again under the atomic schema,
// whose first status write replaces their granular managedFields entry.
func BenchmarkNodePoolStatusPatch(b *testing.B) {
	patches := envInt(b, StatusPatchesEnv, 2000)
	if patches < 100 {
		b.Fatalf("%s=%d: want at least 100 patches (one round over the 100 pools)", StatusPatchesEnv, patches)
	}
	ctx := context.Background()
	env, err := harness.Start(ctx, harness.Options{WithoutCAPIControllers: true, AddToScheme: []func(*kruntime.Scheme) error{apiextensionsv1.AddToScheme}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	// The controller's writes are the field manager "nodepool", as its
	// binary's user agent makes them.
	cfg := rest.CopyConfig(env.Config)
	cfg.UserAgent = "nodepool/bench"
	writer, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	ns := env.NewNamespace(b)
	statuses := engineStatuses(b)

	type phase struct {
		name    string
		atomic  bool
		older   bool
		prefix  string
		reuse   string
		results map[string]float64
	}
	phases := []*phase{
		{name: "before: granular status, every condition with a message", older: true, prefix: "before"},
		{name: "after: atomic status, normal conditions without a message", atomic: true, prefix: "after"},
		{name: "upgraded: the before pools, written by this release", atomic: true, reuse: "before"},
	}
	const pools = 100
	for _, ph := range phases {
		setStatusAtomic(b, env, ph.atomic)
		prefix := ph.prefix
		if ph.reuse != "" {
			prefix = ph.reuse
		}
		settled, drifted := statuses.settled, statuses.drifted
		rolling := statuses.rolling
		if ph.older {
			settled, drifted, rolling = olderMessages(settled), olderMessages(drifted), olderMessages(rolling)
		}
		if ph.reuse == "" {
			for i := range pools {
				createPool(b, env.Client, writer, ns, fmt.Sprintf("%s-%03d", prefix, i), settled)
			}
		}
		cpu0 := childCPU("kube-apiserver") + childCPU("etcd")
		start := time.Now()
		for i := range patches {
			name := fmt.Sprintf("%s-%03d", prefix, i%pools)
			want := drifted
			if (i/pools)%2 == 1 {
				want = settled
			}
			patchStatus(b, writer, ns, name, want)
		}
		elapsed := time.Since(start)
		cpu := childCPU("kube-apiserver") + childCPU("etcd") - cpu0
		patchStatus(b, writer, ns, prefix+"-000", settled)
		patchStatus(b, writer, ns, prefix+"-001", rolling)
		ph.results = map[string]float64{
			"settled-B": float64(storedSize(b, env.Client, ns, prefix+"-000")),
			"rolling-B": float64(storedSize(b, env.Client, ns, prefix+"-001")),
			"cpu-ms":    cpu * 1000 / float64(patches),
			"wall-ms":   float64(elapsed.Milliseconds()) / float64(patches),
			"managed-B": float64(managedSize(b, env.Client, ns, prefix+"-000")),
		}
		b.Logf("%s: settled pool stored %.0f B (managedFields %.0f B), mid-rollout %.0f B; kube-apiserver+etcd CPU %.2f ms a status patch (%.2f ms wall), %d patches, load %s",
			ph.name, ph.results["settled-B"], ph.results["managed-B"], ph.results["rolling-B"], ph.results["cpu-ms"], ph.results["wall-ms"], patches, loadAverage())
	}
	for _, ph := range phases {
		tag := ph.prefix
		if tag == "" {
			tag = "upgraded"
		}
		b.ReportMetric(ph.results["settled-B"], tag+"-settled-B")
		b.ReportMetric(ph.results["rolling-B"], tag+"-rolling-B")
		b.ReportMetric(ph.results["cpu-ms"], tag+"-cpu-ms/patch")
	}
}

// poolStatuses are a pool's statuses as the rollout engine writes them.
type poolStatuses struct{ settled, drifted, rolling nodepoolv1.NodePoolStatus }

// engineStatuses runs the scenario engine's world: a pool of 3 settles
// (settled), the platform bumps a component (drifted: a drift row and
// ConfigUpdatePending), the owner changes its config and the rollout is
// under way (rolling).
func engineStatuses(b *testing.B) poolStatuses {
	b.Helper()
	w := scenario.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	p := w.AddPool(scenario.PoolSpec{Name: "workers", Replicas: 3})
	run := func(d time.Duration) {
		if err := w.RunFor(d); err != nil {
			b.Fatalf("scenario: %v", err)
		}
	}
	run(30 * time.Minute)
	var s poolStatuses
	s.settled = *p.Obj.Status.DeepCopy()
	w.After(time.Minute, "the platform bumps the renderer", func(*scenario.World) { p.Inputs.Platform[scenario.CompRenderer] = "r2" })
	run(5 * time.Minute)
	s.drifted = *p.Obj.Status.DeepCopy()
	w.After(time.Minute, "the owner edits the config", func(*scenario.World) { p.Inputs.Config = "c2" })
	for range 360 {
		run(5 * time.Second)
		if p.Obj.Status.Updating != "" && p.Obj.Status.UpdatedReplicas > 0 {
			break
		}
	}
	if p.Obj.Status.Updating == "" {
		b.Fatalf("scenario: the pool's rollout did not start in 30 minutes\n%s", w.Trace())
	}
	s.rolling = *p.Obj.Status.DeepCopy()
	if len(s.drifted.PendingManagementChanges) == 0 || len(s.settled.Conditions) == 0 {
		b.Fatalf("scenario: settled %d conditions, drifted %d drift rows", len(s.settled.Conditions), len(s.drifted.PendingManagementChanges))
	}
	return s
}

// olderMessages gives st's normal-state conditions the messages the release
// before 2026-12-05 wrote.
func olderMessages(st nodepoolv1.NodePoolStatus) nodepoolv1.NodePoolStatus {
	st = *st.DeepCopy()
	older := map[string]string{
		nodepoolv1.ConditionValidMachineConfig:      "every referenced config is valid",
		nodepoolv1.ConditionValidGeneratedPayload:   "the payload renders and validates",
		nodepoolv1.ConditionUpdatingConfig:          "no rollout in progress",
		nodepoolv1.ConditionUpdatingVersion:         "no rollout in progress",
		nodepoolv1.ConditionReachedIgnitionEndpoint: "machines fetch their payload from the payload server",
		nodepoolv1.ConditionBootstrapDataAvailable:  "every Secret the machines boot from is in place",
		nodepoolv1.ConditionReconciliationActive:    "the controller acts on this pool",
		nodepoolv1.ConditionConfigUpdatePending:     "the nodes run the latest platform components",
	}
	for i, c := range st.Conditions {
		if m, ok := older[c.Type]; ok && c.Reason == nodepoolv1.ReasonAsExpected && c.Message == "" {
			st.Conditions[i].Message = m
		}
		if c.Type == nodepoolv1.ConditionAllMachinesReady && c.Reason == nodepoolv1.ReasonAsExpected && c.Message == "" {
			if r := meta.FindStatusCondition(st.Conditions, nodepoolv1.ConditionReady); r != nil {
				st.Conditions[i].Message = r.Message
			}
		}
	}
	return st
}

// createPool creates a pool as its owner does, then writes its metadata
// (finalizer, the annotations the controller keeps) and status as the
// controller does.
func createPool(b *testing.B, owner, writer client.Client, ns, name string, st nodepoolv1.NodePoolStatus) {
	b.Helper()
	ctx := context.Background()
	p := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.ClusterName = "c1"
	p.Spec.Replicas = ptr.To(int32(3))
	p.Spec.Release.Version = "v1.36.3"
	p.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: "DockerMachineTemplate", APIGroup: "infrastructure.cluster.x-k8s.io", Name: "workers-template"}
	p.Spec.Config = []nodepoolv1.LocalObjectReference{{Name: "workers-chrony"}}
	if err := owner.Create(ctx, p); err != nil {
		b.Fatalf("creating pool %s: %v", name, err)
	}
	before := p.DeepCopy()
	p.Finalizers = []string{nodepoolv1.Finalizer}
	p.Annotations = map[string]string{
		nodepoolv1.AnnotationCurrentPayload:       st.Rollout.Boots,
		nodepoolv1.AnnotationCurrentRolloutConfig: fmt.Sprintf("%064x", len(name)),
	}
	if err := writer.Patch(ctx, p, client.MergeFrom(before)); err != nil {
		b.Fatalf("writing pool %s's metadata: %v", name, err)
	}
	patchStatus(b, writer, ns, name, st)
}

// patchStatus writes st as the pool's status by a merge patch from what the
// API server holds, as the controller does.
func patchStatus(b *testing.B, writer client.Client, ns, name string, st nodepoolv1.NodePoolStatus) {
	b.Helper()
	ctx := context.Background()
	p := &nodepoolv1.NodePool{}
	if err := writer.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		b.Fatal(err)
	}
	before := p.DeepCopy()
	p.Status = *st.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	now := metav1.Now()
	for i := range p.Status.Conditions {
		p.Status.Conditions[i].ObservedGeneration = p.Generation
		if c := meta.FindStatusCondition(before.Status.Conditions, p.Status.Conditions[i].Type); c == nil || c.Status != p.Status.Conditions[i].Status {
			p.Status.Conditions[i].LastTransitionTime = now
		} else {
			p.Status.Conditions[i].LastTransitionTime = c.LastTransitionTime
		}
	}
	if err := writer.Status().Patch(ctx, p, client.MergeFrom(before)); err != nil {
		b.Fatalf("patching pool %s's status: %v", name, err)
	}
}

// storedSize is the pool as etcd holds it: compact JSON, managedFields
// included.
func storedSize(b *testing.B, c client.Client, ns, name string) int {
	b.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nodepoolv1.GroupVersion.WithKind("NodePool"))
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		b.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		b.Fatal(err)
	}
	return compact.Len()
}

func managedSize(b *testing.B, c client.Client, ns, name string) int {
	b.Helper()
	p := &nodepoolv1.NodePool{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(p.ManagedFields)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}

// setStatusAtomic makes the NodePool CRD's status atomic (as shipped) or
// granular (as before 2026-12-05), and waits until a status write shows it.
func setStatusAtomic(b *testing.B, env *harness.Env, atomic bool) {
	b.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "nodepools.nodepool.dev"}, crd); err != nil {
		b.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		st := v.Schema.OpenAPIV3Schema.Properties["status"]
		if atomic {
			st.XMapType = ptr.To("atomic")
		} else {
			st.XMapType = nil
		}
		v.Schema.OpenAPIV3Schema.Properties["status"] = st
	}
	if err := env.Client.Update(ctx, crd); err != nil {
		b.Fatalf("updating the NodePool CRD: %v", err)
	}
	// The API server serves the new schema a moment later: a probe pool's
	// status write shows which one it applied.
	probe := &nodepoolv1.NodePool{}
	probe.GenerateName, probe.Namespace = "probe-", "default"
	probe.Spec.ClusterName, probe.Spec.Release.Version, probe.Spec.Replicas = "c1", "v1.36.3", ptr.To(int32(1))
	probe.Spec.InfrastructureTemplateRef = nodepoolv1.TemplateReference{Kind: "DockerMachineTemplate", APIGroup: "infrastructure.cluster.x-k8s.io", Name: "t"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p := probe.DeepCopy()
		if err := env.Client.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
		before := p.DeepCopy()
		p.Status.Conditions = []metav1.Condition{{Type: "Probe", Status: metav1.ConditionTrue, Reason: "Probe", LastTransitionTime: metav1.Now()}}
		if err := env.Client.Status().Patch(ctx, p, client.MergeFrom(before)); err != nil {
			b.Fatal(err)
		}
		granular := false
		for _, mf := range p.ManagedFields {
			if mf.Subresource == "status" && mf.FieldsV1 != nil && bytes.Contains(mf.FieldsV1.Raw, []byte(`k:{\"type\":\"Probe\"}`)) {
				granular = true
			}
		}
		_ = env.Client.Delete(ctx, p)
		if granular != atomic {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the API server did not apply the NodePool CRD's status schema (atomic %v) within 2 minutes", atomic)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
