package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/cli"
	"nodepool.dev/nodepool/internal/history"
	"nodepool.dev/nodepool/internal/payload"
	"nodepool.dev/nodepool/internal/secrets"
	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
	"nodepool.dev/nodepool/test/stack"
)

// A planScenario edits a settled pool of two machines: plan predicts,
// then the edit is applied and what the controller does is observed. One
// case per kind of input plan observes (a ConfigMap, a Secret, the
// management config, the template, spec fields) and per answer it gives;
// combinations of policies, pauses and forced rollouts are scenarios in
// internal/scenario, whose invariants check that the decision says what
// the engine then does.
type planScenario struct {
	name string
	// setup edits the pool before it is created (nil: the default pool).
	setup func(ns string, p *nodepoolv1.NodePool)
	// edit returns the edited manifests, given the pool as it is.
	edit func(t *testing.T, ns string, p *nodepoolv1.NodePool) []client.Object
	// want is the predicted rollout, initiator and changed components.
	want        string
	initiator   string
	changed     []string
	machines    int32
	steps       int32
	inPlace     []string
	pending     []string
	goldenTable string
	// updatedInPlace: the pool is InPlace, so the machines are updated
	// where they run rather than replaced.
	updatedInPlace bool
}

func TestPlanAgreesWithWhatTheControllerThenDoes(t *testing.T) {
	for _, sc := range []planScenario{
		{
			name: "a user config changes", want: cli.PlanNow, initiator: "spec", changed: []string{"user-configs"}, machines: 2, steps: 2,
			goldenTable: "plan-config",
			edit: func(_ *testing.T, ns string, _ *nodepoolv1.NodePool) []client.Object {
				return []client.Object{stack.ConfigMap(ns, "chrony", stack.Chrony("ntp.corp.example"))}
			},
		},
		{
			name: "a user config of an InPlace pool changes", want: cli.PlanNow, initiator: "spec", changed: []string{"user-configs"}, machines: 2, steps: 2,
			updatedInPlace: true,
			setup: func(_ string, p *nodepoolv1.NodePool) {
				p.Spec.Management.UpgradeType = nodepoolv1.UpgradeTypeInPlace
			},
			edit: func(_ *testing.T, ns string, _ *nodepoolv1.NodePool) []client.Object {
				return []client.Object{stack.ConfigMap(ns, "chrony", stack.Chrony("inplace.corp.example"))}
			},
		},
		{
			name: "a proxy is set, with maxSurge 2", want: cli.PlanNow, initiator: "spec", changed: []string{"proxy"}, machines: 2, steps: 1,
			inPlace: []string{"management.replace"},
			edit: func(_ *testing.T, _ string, p *nodepoolv1.NodePool) []client.Object {
				p.Spec.Proxy = &nodepoolv1.Proxy{HTTPSProxy: "http://proxy.corp.example:3128", NoProxy: []string{".corp.example"}}
				p.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(2))
				return []client.Object{p}
			},
		},
		{
			name: "node labels and taints change", want: cli.PlanNone, inPlace: []string{"nodeLabels", "taints"},
			goldenTable: "plan-in-place",
			edit: func(_ *testing.T, _ string, p *nodepoolv1.NodePool) []client.Object {
				p.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"example.com/role": "db"}
				p.Spec.Taints = []nodepoolv1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: "NoSchedule"}}
				return []client.Object{p}
			},
		},
		{
			name: "the pool scales up", want: cli.PlanNone, inPlace: []string{"replicas 2→3"},
			edit: func(_ *testing.T, _ string, p *nodepoolv1.NodePool) []client.Object {
				p.Spec.Replicas = ptr.To[int32](3)
				return []client.Object{p}
			},
		},
		{
			name: "the pull secret rotates", want: cli.PlanNone, pending: []string{"pull-secret"},
			setup: func(ns string, p *nodepoolv1.NodePool) {
				p.Spec.PullSecretRef = &nodepoolv1.LocalObjectReference{Name: "pull"}
			},
			edit: func(_ *testing.T, ns string, _ *nodepoolv1.NodePool) []client.Object {
				return []client.Object{stack.PullSecret(ns, "pull", "robot:rotated")}
			},
		},
		{
			name: "the platform changes the API-server proxy", want: cli.PlanNone, pending: []string{"apiserver-proxy"},
			goldenTable: "plan-platform",
			edit: func(_ *testing.T, _ string, _ *nodepoolv1.NodePool) []client.Object {
				return []client.Object{managementConfig("2")}
			},
		},
		{
			name: "a config changes while the pool is paused", want: cli.PlanDeferred, initiator: "spec", changed: []string{"user-configs"}, machines: 2, steps: 2,
			goldenTable: "plan-paused",
			edit: func(_ *testing.T, ns string, p *nodepoolv1.NodePool) []client.Object {
				p.Spec.Management.PausedUntil = "true"
				return []client.Object{p, stack.ConfigMap(ns, "chrony", stack.Chrony("paused.corp.example"))}
			},
		},
		{
			name: "rolloutAfter is tomorrow", want: cli.PlanScheduled, initiator: "restart", machines: 2, steps: 2,
			edit: func(_ *testing.T, _ string, p *nodepoolv1.NodePool) []client.Object {
				p.Spec.Management.RolloutAfter = &metav1.Time{Time: time.Now().Add(24 * time.Hour).Truncate(time.Second)}
				return []client.Object{p}
			},
		},
		{
			name: "a user config becomes invalid", want: cli.PlanInvalid,
			edit: func(_ *testing.T, ns string, _ *nodepoolv1.NodePool) []client.Object {
				return []client.Object{stack.ConfigMap(ns, "chrony", "ignition: {version: 9.9.9}\n")}
			},
		},
		{
			name: "the edit breaks a validation rule", want: cli.PlanRefused,
			edit: func(_ *testing.T, _ string, p *nodepoolv1.NodePool) []client.Object {
				p.Spec.AutoScaling = &nodepoolv1.AutoScaling{Min: 1, Max: 3}
				return []client.Object{p}
			},
		},
		{
			name: "the infrastructure template changes", want: cli.PlanNow, initiator: "spec", changed: []string{"infrastructure-template"}, machines: 2, steps: 2,
			edit: func(t *testing.T, ns string, _ *nodepoolv1.NodePool) []client.Object {
				tmpl := &simv1.SimMachineTemplate{}
				if err := st.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "small"}, tmpl); err != nil {
					t.Fatal(err)
				}
				tmpl.TypeMeta = metav1.TypeMeta{APIVersion: simv1.GroupVersion.String(), Kind: simv1.KindSimMachineTemplate}
				tmpl.ManagedFields, tmpl.ResourceVersion = nil, ""
				tmpl.Spec.Template.Spec.CPUs = 4
				return []client.Object{tmpl}
			},
		},
		{
			name: "a new pool", want: cli.PlanCreate, initiator: "spec", machines: 2, steps: 1,
			edit: func(_ *testing.T, ns string, _ *nodepoolv1.NodePool) []client.Object {
				return []client.Object{poolSpec(ns, "more-workers", 2)}
			},
		},
	} {
		t.Run(sc.name, func(t *testing.T) { sc.run(t) })
	}
}

func managementConfig(digestChar string) *corev1.ConfigMap {
	cm := stack.ManagementConfig("registry.example/haproxy@sha256:" + strings.Repeat(digestChar, 64))
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	return cm
}

func (sc planScenario) run(t *testing.T) {
	ns := newNamespace(t)
	if sc.setup != nil {
		mustCreate(t, stack.PullSecret(ns, "pull", "robot:initial"))
	}
	p := newPool(t, ns, "workers", 2, func(p *nodepoolv1.NodePool) {
		if sc.setup != nil {
			sc.setup(ns, p)
		}
	})
	before := waitFor(t, p, rolloutTimeout, "2 ready machines", settled(2))
	revs := decodeJSON[[]history.Entry](t, ok(t, ns, "rollout", "history", "workers", "-o", "json"))
	live := before.pool.DeepCopy()
	live.TypeMeta = metav1.TypeMeta{APIVersion: nodepoolv1.GroupVersion.String(), Kind: "NodePool"}
	live.ManagedFields, live.Status = nil, nodepoolv1.NodePoolStatus{}
	edited := sc.edit(t, ns, live)
	files := writeManifests(t, edited)

	// Plan.
	args := []string{"plan", "-o", "json"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	r := kubectl(t, ns, args...)
	wantCode := 0
	if sc.want == cli.PlanInvalid || sc.want == cli.PlanRefused {
		wantCode = cli.ExitFailure
	}
	if r.code != wantCode {
		t.Fatalf("plan exit %d, want %d\n%s%s", r.code, wantCode, r.out, r.err)
	}
	plans := decodeJSON[[]cli.PlanResult](t, r.out)
	var pr cli.PlanResult
	for _, x := range plans {
		if x.Namespace == ns {
			pr = x
		}
	}
	if sc.goldenTable != "" {
		table := kubectl(t, ns, append([]string{"plan"}, args[3:]...)...)
		golden(t, sc.goldenTable, table.out, ns)
	}
	var changed []string
	for _, c := range pr.Changed {
		changed = append(changed, c.Component)
	}
	if pr.Rollout != sc.want || pr.Initiator != sc.initiator || !slices.Equal(changed, sc.changed) || pr.Machines != sc.machines ||
		pr.Steps != sc.steps || !slices.Equal(pr.InPlace, sc.inPlace) || !slices.Equal(pr.PendingDrift, sc.pending) {
		t.Fatalf("plan predicted rollout %s, initiator %q, changed %v, %d machines in %d steps, in place %v, pending %v;\nwant %s, %q, %v, %d in %d, %v, %v\n(message: %s; warnings: %v)",
			pr.Rollout, pr.Initiator, changed, pr.Machines, pr.Steps, pr.InPlace, pr.PendingDrift,
			sc.want, sc.initiator, sc.changed, sc.machines, sc.steps, sc.inPlace, sc.pending, pr.Message, pr.Warnings)
	}
	if len(pr.Warnings) > 0 {
		t.Errorf("plan warns: %v", pr.Warnings)
	}

	// Apply, then observe what the controller does.
	applyErr := applyManifests(t, edited)
	if sc.want == cli.PlanRefused {
		if !apierrors.IsInvalid(applyErr) {
			t.Fatalf("plan said refused; applying gave %v", applyErr)
		}
		return
	}
	if applyErr != nil {
		t.Fatal(applyErr)
	}
	switch sc.want {
	case cli.PlanCreate:
		np := &nodepoolv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pr.Pool}}
		waitFor(t, np, rolloutTimeout, "the new pool's machines", settled(int(pr.Machines)))
		checkRecord(t, ns, pr.Pool, pr, 1)
	case cli.PlanNow:
		if sc.updatedInPlace {
			if pr.Strategy != "InPlace" || pr.MaxUnavailable != 1 {
				t.Errorf("plan strategy %q maxUnavailable %d, want InPlace 1", pr.Strategy, pr.MaxUnavailable)
			}
			waitFor(t, p, rolloutTimeout, "every machine updated in place", func(s state) bool {
				return settled(2)(s) && s.machines.Equal(before.machines) && s.pool.Annotations[nodepoolv1.AnnotationCurrentPayload] != before.pool.Annotations[nodepoolv1.AnnotationCurrentPayload]
			})
			checkRecord(t, ns, "workers", pr, len(revs)+1)
			break
		}
		waitFor(t, p, rolloutTimeout, "every machine replaced", func(s state) bool {
			return settled(2)(s) && s.machines.Intersection(before.machines).Len() == 0
		})
		if replaced := int32(before.machines.Len()); replaced != pr.Machines {
			t.Errorf("%d machines replaced, plan said %d", replaced, pr.Machines)
		}
		checkRecord(t, ns, "workers", pr, len(revs)+1)
	default:
		// Nothing is replaced; the controller reports what plan said.
		waitFor(t, p, 30*time.Second, "the controller to act on the change", func(s state) bool {
			if s.pool.Status.ObservedGeneration != s.pool.Generation {
				return false
			}
			var pending []string
			for _, row := range s.pool.Status.PendingManagementChanges {
				pending = append(pending, row.Component)
			}
			return slices.Equal(pending, pr.PendingDrift) && reported(s.pool, pr.Rollout)
		})
		holdsFor(t, p, 5*time.Second, "no machine replaced", func(s state) bool {
			return s.machines.IsSuperset(before.machines)
		})
		if got := decodeJSON[[]history.Entry](t, ok(t, ns, "rollout", "history", "workers", "-o", "json")); len(got) != len(revs) {
			t.Errorf("a rollout was recorded: %+v", got[len(got)-1])
		}
	}
}

// reported says whether the pool's conditions show what plan predicted.
func reported(p *nodepoolv1.NodePool, rollout string) bool {
	cond := func(typ string) metav1.Condition {
		for _, c := range p.Status.Conditions {
			if c.Type == typ {
				return c
			}
		}
		return metav1.Condition{}
	}
	switch rollout {
	case cli.PlanDeferred:
		return cond(nodepoolv1.ConditionUpdatingConfig).Reason == nodepoolv1.ReasonPaused
	case cli.PlanScheduled:
		return cond(nodepoolv1.ConditionUpdatingConfig).Reason == nodepoolv1.ReasonRolloutScheduled
	case cli.PlanInvalid:
		return cond(nodepoolv1.ConditionValidMachineConfig).Status == metav1.ConditionFalse
	}
	return p.Status.Updating == ""
}

// checkRecord compares the revision the rollout recorded with the plan:
// initiator, changed components, rollout and payload hashes.
func checkRecord(t *testing.T, ns, pool string, pr cli.PlanResult, revision int) {
	t.Helper()
	var h []history.Entry
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		h = decodeJSON[[]history.Entry](t, ok(t, ns, "rollout", "history", pool, "-o", "json"))
		if len(h) >= revision {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if len(h) < revision {
		t.Fatalf("revision %d not recorded: %+v", revision, h)
	}
	e := h[revision-1]
	var changed []string
	for _, c := range pr.Changed {
		changed = append(changed, c.Component)
	}
	if pr.Rollout == cli.PlanCreate {
		changed = e.Changed // the first rollout changes every component
	}
	if e.Initiator != pr.Initiator || !slices.Equal(e.Changed, changed) || e.RolloutHash != pr.RolloutHash || e.PayloadHash != pr.PayloadHash {
		t.Errorf("the controller recorded initiator %s, changed %v, rollout %s, payload %s; plan said %s, %v, %s, %s",
			e.Initiator, e.Changed, payload.Short(e.RolloutHash), payload.Short(e.PayloadHash),
			pr.Initiator, changed, payload.Short(pr.RolloutHash), payload.Short(pr.PayloadHash))
	}
	// The object owning the machines: a MachineDeployment, or the
	// MachineSet of an InPlace pool.
	var template *clusterv1.MachineTemplateSpec
	key := client.ObjectKey{Namespace: ns, Name: pool}
	if pr.Strategy == "InPlace" {
		ms := &clusterv1.MachineSet{}
		if err := st.Env.Client.Get(context.Background(), key, ms); err != nil {
			t.Fatal(err)
		}
		template = &ms.Spec.Template
	} else {
		md := &clusterv1.MachineDeployment{}
		if err := st.Env.Client.Get(context.Background(), key, md); err != nil {
			t.Fatal(err)
		}
		template = &md.Spec.Template
	}
	if got, want := ptr.Deref(template.Spec.Bootstrap.DataSecretName, ""), secrets.UserDataSecretName(pool, pr.RolloutHash); got != want {
		t.Errorf("the machines' template boots %s; plan predicted rollout hash %s (%s)", got, payload.Short(pr.RolloutHash), want)
	}
}

// writeManifests writes the objects as a YAML file of several documents
// (the first two) and single files (the rest).
func writeManifests(t *testing.T, objs []client.Object) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	var docs []string
	for i, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			docs = append(docs, string(b))
			continue
		}
		f := filepath.Join(dir, o.GetName()+".yaml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	f := filepath.Join(dir, "edit.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return append([]string{f}, files...)
}

// applyManifests applies the edited objects as kubectl apply would: the
// pool's spec, labels and annotations, the ConfigMaps' and Secrets' data.
func applyManifests(t *testing.T, objs []client.Object) error {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		cur := o.DeepCopyObject().(client.Object)
		err := st.Env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur)
		if apierrors.IsNotFound(err) {
			if err := st.Env.Client.Create(ctx, o.DeepCopyObject().(client.Object)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		switch v := o.(type) {
		case *nodepoolv1.NodePool:
			c := cur.(*nodepoolv1.NodePool)
			c.Spec = v.Spec
		case *corev1.ConfigMap:
			cur.(*corev1.ConfigMap).Data = v.Data
		case *corev1.Secret:
			cur.(*corev1.Secret).Data = v.Data
		case *simv1.SimMachineTemplate:
			cur.(*simv1.SimMachineTemplate).Spec = v.Spec
		}
		if err := st.Env.Client.Update(ctx, cur); err != nil {
			return err
		}
	}
	return nil
}

// holdsFor fails the test if cond stops holding during d.
func holdsFor(t *testing.T, p *nodepoolv1.NodePool, d time.Duration, what string, cond func(state) bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if s := observe(t, p); !cond(s) {
			t.Fatalf("%s stopped holding: status %+v", what, s.pool.Status)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// afterEveryMachineSet returns a whole second, not in the future, after the
// creation of every MachineSet in ns (waiting for the clock if needed), so a
// rolloutAfter set to it replaces every machine: timestamps have second
// resolution and Cluster API keeps a MachineSet created in the same second.
func afterEveryMachineSet(t *testing.T, ns string) time.Time {
	t.Helper()
	var sets clusterv1.MachineSetList
	if err := st.Env.Client.List(context.Background(), &sets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Second)
	for _, ms := range sets.Items {
		if c := ms.CreationTimestamp.Time; !c.Before(at) {
			at = c.Truncate(time.Second).Add(time.Second)
		}
	}
	time.Sleep(time.Until(at))
	return at
}
