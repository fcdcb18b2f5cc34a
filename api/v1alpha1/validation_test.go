package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) {
	var err error
	env, err = harness.Start(context.Background(), harness.Options{WithoutCAPIControllers: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

func minimal(ns, name string) *v1.NodePool {
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.NodePoolSpec{
			ClusterName: "prod-1",
			Replicas:    ptr.To[int32](3),
			Release:     v1.Release{Version: "v1.36.3"},
			InfrastructureTemplateRef: v1.TemplateReference{
				APIGroup: "infrastructure.sim.nodepool.dev", Kind: "SimMachineTemplate", Name: "workers",
			},
		},
	}
}

func full(ns, name string) *v1.NodePool {
	p := minimal(ns, name)
	p.Spec.Release.Image = "registry.example/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	p.Spec.Config = []v1.LocalObjectReference{{Name: "chrony"}, {Name: "sysctl"}}
	p.Spec.PullSecretRef = &v1.LocalObjectReference{Name: "pull-secret"}
	p.Spec.AdditionalTrustBundleRef = &v1.LocalObjectReference{Name: "corp-ca"}
	p.Spec.Proxy = &v1.Proxy{HTTPProxy: "http://proxy.corp:3128", HTTPSProxy: "http://proxy.corp:3128", NoProxy: []string{".corp", "10.0.0.0/8"}}
	p.Spec.RegistryMirrors = []v1.RegistryMirror{{Source: "quay.io/org", Mirrors: []string{"mirror.corp/org"}}}
	p.Spec.NodeLabels = map[string]v1.LabelValue{"example.com/role": "worker", "tier": ""}
	p.Spec.Taints = []v1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: "NoSchedule"}}
	p.Spec.NodeDrainTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	p.Spec.NodeVolumeDetachTimeout = &metav1.Duration{Duration: 2 * time.Minute}
	p.Spec.Management = v1.Management{
		UpgradeType: v1.UpgradeTypeReplace,
		Replace: v1.ReplaceStrategy{
			Strategy:      v1.ReplaceStrategyRollingUpdate,
			RollingUpdate: v1.RollingUpdate{MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))},
		},
		InPlace:           v1.InPlaceStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(2))},
		RolloutAfter:      &metav1.Time{Time: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)},
		PausedUntil:       "2026-12-01T02:00:00Z",
		ManagementUpdates: v1.ManagementUpdatesNewNodes,
		AutoRepair: &v1.AutoRepair{
			NodeStartupTimeout: &metav1.Duration{Duration: 20 * time.Minute},
			UnhealthyTimeout:   &metav1.Duration{Duration: 8 * time.Minute},
			MaxUnhealthy:       ptr.To(intstr.FromString("40%")),
		},
	}
	return p
}

func TestValidNodePoolsAreAccepted(t *testing.T) {
	ns := env.NewNamespace(t)
	for name, p := range map[string]*v1.NodePool{"minimal": minimal(ns, "minimal"), "full": full(ns, "full")} {
		t.Run(name, func(t *testing.T) {
			if err := env.Client.Create(context.Background(), p); err != nil {
				t.Fatalf("valid NodePool refused: %v", err)
			}
		})
	}
	got := &v1.NodePool{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "minimal"}, got); err != nil {
		t.Fatal(err)
	}
	m := got.Spec.Management
	if m.UpgradeType != v1.UpgradeTypeReplace || m.Replace.Strategy != v1.ReplaceStrategyRollingUpdate ||
		*m.Replace.RollingUpdate.MaxSurge != intstr.FromInt32(1) || *m.Replace.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) ||
		*m.InPlace.MaxUnavailable != intstr.FromInt32(1) || m.ManagementUpdates != v1.ManagementUpdatesOnNextRollout {
		t.Errorf("defaults not applied as documented: %+v", m)
	}
	if m.RevisionHistoryLimit == nil || *m.RevisionHistoryLimit != 10 {
		t.Errorf("spec.management.revisionHistoryLimit defaults to %v, want 10 (like a Deployment's)", m.RevisionHistoryLimit)
	}
}

func TestInvalidNodePoolsAreRefusedWithActionableMessages(t *testing.T) {
	ns := env.NewNamespace(t)
	cases := []struct {
		name   string
		mutate func(p *v1.NodePool)
		want   string
	}{
		{"replicas and autoScaling together", func(p *v1.NodePool) { p.Spec.AutoScaling = &v1.AutoScaling{Min: 1, Max: 3} },
			"spec.replicas and spec.autoScaling are mutually exclusive"},
		{"neither replicas nor autoScaling", func(p *v1.NodePool) { p.Spec.Replicas = nil },
			"set spec.replicas (a fixed size) or spec.autoScaling"},
		{"autoScaling min above max", func(p *v1.NodePool) { p.Spec.Replicas = nil; p.Spec.AutoScaling = &v1.AutoScaling{Min: 5, Max: 2} },
			"spec.autoScaling.min must be less than or equal to spec.autoScaling.max"},
		{"negative replicas", func(p *v1.NodePool) { p.Spec.Replicas = ptr.To[int32](-1) },
			"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"},
		{"maxSurge and maxUnavailable both 0", func(p *v1.NodePool) {
			p.Spec.Management.Replace.RollingUpdate = v1.RollingUpdate{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		}, "maxSurge and maxUnavailable cannot both be 0"},
		{"maxSurge 0% and maxUnavailable 0", func(p *v1.NodePool) {
			p.Spec.Management.Replace.RollingUpdate = v1.RollingUpdate{MaxSurge: ptr.To(intstr.FromString("0%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		}, "maxSurge and maxUnavailable cannot both be 0"},
		{"maxSurge not a number or percentage", func(p *v1.NodePool) {
			p.Spec.Management.Replace.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("lots"))
		}, "maxSurge must be a non-negative number or a percentage"},
		{"inPlace maxUnavailable 0", func(p *v1.NodePool) { p.Spec.Management.InPlace.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			"spec.management.inPlace.maxUnavailable must be at least 1"},
		{"revisionHistoryLimit negative", func(p *v1.NodePool) { p.Spec.Management.RevisionHistoryLimit = ptr.To[int32](-1) },
			"spec.management.revisionHistoryLimit: Invalid value: -1: spec.management.revisionHistoryLimit in body should be greater than or equal to 0"},
		{"revisionHistoryLimit above 100", func(p *v1.NodePool) { p.Spec.Management.RevisionHistoryLimit = ptr.To[int32](101) },
			"spec.management.revisionHistoryLimit in body should be less than or equal to 100"},
		{"pausedUntil a word", func(p *v1.NodePool) { p.Spec.Management.PausedUntil = "tomorrow" },
			`spec.management.pausedUntil must be "true", "false" or an RFC3339 time such as 2026-12-01T02:00:00Z, got "tomorrow"`},
		{"pausedUntil a date without time", func(p *v1.NodePool) { p.Spec.Management.PausedUntil = "2026-12-01" },
			`spec.management.pausedUntil must be "true", "false" or an RFC3339 time`},
		{"pausedUntil on February 30th", func(p *v1.NodePool) { p.Spec.Management.PausedUntil = "2027-02-30T00:00:00Z" },
			`spec.management.pausedUntil must be "true", "false" or an RFC3339 time such as 2026-12-01T02:00:00Z, got "2027-02-30T00:00:00Z"`},
		{"pausedUntil in month 13", func(p *v1.NodePool) { p.Spec.Management.PausedUntil = "2027-13-01T00:00:00Z" },
			`spec.management.pausedUntil must be "true", "false" or an RFC3339 time`},
		{"pausedUntil at hour 25", func(p *v1.NodePool) { p.Spec.Management.PausedUntil = "2027-02-28T25:00:00Z" },
			`spec.management.pausedUntil must be "true", "false" or an RFC3339 time`},
		{"nodeDrainTimeout beyond a year", func(p *v1.NodePool) {
			p.Spec.NodeDrainTimeout = &metav1.Duration{Duration: 600000 * time.Hour}
		}, "spec.nodeDrainTimeout must be a duration between 0s and 8760h"},
		{"drain Force without a timeout", func(p *v1.NodePool) { p.Spec.Management.Drain = &v1.Drain{OnTimeout: v1.DrainForce} },
			"spec.management.drain.timeout is required with onTimeout Force or Halt"},
		{"drain timeout below 30s", func(p *v1.NodePool) {
			p.Spec.Management.Drain = &v1.Drain{OnTimeout: v1.DrainHalt, Timeout: &metav1.Duration{Duration: 10 * time.Second}}
		}, "spec.management.drain.timeout must be a duration between 30s and 168h"},
		{"drain timeout beyond a week", func(p *v1.NodePool) {
			p.Spec.Management.Drain = &v1.Drain{Timeout: &metav1.Duration{Duration: 200 * time.Hour}}
		}, "spec.management.drain.timeout must be a duration between 30s and 168h"},
		{"drain onTimeout unknown", func(p *v1.NodePool) { p.Spec.Management.Drain = &v1.Drain{OnTimeout: "Evict"} },
			"spec.management.drain.onTimeout"},
		{"drain and nodeDrainTimeout both", func(p *v1.NodePool) {
			p.Spec.NodeDrainTimeout = &metav1.Duration{Duration: time.Minute}
			p.Spec.Management.Drain = &v1.Drain{OnTimeout: v1.DrainWait}
		}, "spec.nodeDrainTimeout and spec.management.drain are exclusive"},
		{"nodeDrainTimeout negative", func(p *v1.NodePool) { p.Spec.NodeDrainTimeout = &metav1.Duration{Duration: -time.Minute} },
			"spec.nodeDrainTimeout must be a duration between 0s and 8760h"},
		{"nodeVolumeDetachTimeout beyond a year", func(p *v1.NodePool) {
			p.Spec.NodeVolumeDetachTimeout = &metav1.Duration{Duration: 9000 * time.Hour}
		}, "spec.nodeVolumeDetachTimeout must be a duration between 0s and 8760h"},
		{"nodeVolumeDetachTimeout negative", func(p *v1.NodePool) { p.Spec.NodeVolumeDetachTimeout = &metav1.Duration{Duration: -time.Second} },
			"spec.nodeVolumeDetachTimeout must be a duration between 0s and 8760h"},
		{"autoRepair nodeStartupTimeout negative", func(p *v1.NodePool) {
			p.Spec.Management.AutoRepair = &v1.AutoRepair{NodeStartupTimeout: &metav1.Duration{Duration: -time.Minute}}
		}, "spec.management.autoRepair.nodeStartupTimeout must be a duration between 0s and 8760h"},
		{"autoRepair unhealthyTimeout 0s", func(p *v1.NodePool) {
			p.Spec.Management.AutoRepair = &v1.AutoRepair{UnhealthyTimeout: &metav1.Duration{}}
		}, "spec.management.autoRepair.unhealthyTimeout must be a duration between 1s and 8760h"},
		{"autoRepair unhealthyTimeout beyond a year", func(p *v1.NodePool) {
			p.Spec.Management.AutoRepair = &v1.AutoRepair{UnhealthyTimeout: &metav1.Duration{Duration: 9000 * time.Hour}}
		}, "spec.management.autoRepair.unhealthyTimeout must be a duration between 1s and 8760h"},
		{"autoRepair maxUnhealthy negative", func(p *v1.NodePool) {
			p.Spec.Management.AutoRepair = &v1.AutoRepair{MaxUnhealthy: ptr.To(intstr.FromInt32(-1))}
		}, "spec.management.autoRepair.maxUnhealthy must be a non-negative number or a percentage from 0% to 100%"},
		{"autoRepair maxUnhealthy above 100%", func(p *v1.NodePool) {
			p.Spec.Management.AutoRepair = &v1.AutoRepair{MaxUnhealthy: ptr.To(intstr.FromString("150%"))}
		}, "spec.management.autoRepair.maxUnhealthy must be a non-negative number or a percentage from 0% to 100%"},
		{"autoRepair maxUnhealthy a word", func(p *v1.NodePool) {
			p.Spec.Management.AutoRepair = &v1.AutoRepair{MaxUnhealthy: ptr.To(intstr.FromString("some"))}
		}, "spec.management.autoRepair.maxUnhealthy must be a non-negative number or a percentage"},
		{"a reserved node label: the payload", func(p *v1.NodePool) { p.Spec.NodeLabels = map[string]v1.LabelValue{"nodepool.dev/payload": "fake"} },
			"spec.nodeLabels: keys under nodepool.dev/ are reserved"},
		{"a reserved node label: the pool", func(p *v1.NodePool) { p.Spec.NodeLabels = map[string]v1.LabelValue{"nodepool.dev/pool": "other"} },
			"spec.nodeLabels: keys under nodepool.dev/ are reserved"},
		{"release version without v", func(p *v1.NodePool) { p.Spec.Release.Version = "1.36.3" },
			`spec.release.version must look like v1.2.3 (a "v", then major.minor.patch), got "1.36.3"`},
		{"release version without patch", func(p *v1.NodePool) { p.Spec.Release.Version = "v1.36" },
			`spec.release.version must look like v1.2.3`},
		{"more than 10 configs", func(p *v1.NodePool) {
			for i := range 11 {
				p.Spec.Config = append(p.Spec.Config, v1.LocalObjectReference{Name: fmt.Sprintf("c%d", i)})
			}
		}, "spec.config: Too many: 11: must have at most 10 items"},
		{"the same config twice", func(p *v1.NodePool) {
			p.Spec.Config = []v1.LocalObjectReference{{Name: "chrony"}, {Name: "chrony"}}
		}, `spec.config[1]: Duplicate value: {"name":"chrony"}`},
		{"node label key with a space", func(p *v1.NodePool) { p.Spec.NodeLabels = map[string]v1.LabelValue{"bad key": "x"} },
			"spec.nodeLabels: every key must be a qualified name"},
		{"node label value too long", func(p *v1.NodePool) {
			p.Spec.NodeLabels = map[string]v1.LabelValue{"role": v1.LabelValue(strings.Repeat("a", 64))}
		}, "spec.nodeLabels.role: Too long: may not be more than 63 bytes"},
		{"node label value with a slash", func(p *v1.NodePool) { p.Spec.NodeLabels = map[string]v1.LabelValue{"role": "a/b"} },
			"spec.nodeLabels: every value must be empty or at most 63 characters"},
		{"taint key with a space", func(p *v1.NodePool) { p.Spec.Taints = []v1.Taint{{Key: "bad key", Effect: "NoSchedule"}} },
			"spec.taints[].key must be a qualified name"},
		{"taint value with a colon", func(p *v1.NodePool) { p.Spec.Taints = []v1.Taint{{Key: "k", Value: "a:b", Effect: "NoSchedule"}} },
			"spec.taints[].value must be empty or at most 63 characters"},
		{"taint with an unknown effect", func(p *v1.NodePool) { p.Spec.Taints = []v1.Taint{{Key: "k", Effect: "Sometimes"}} },
			`spec.taints[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
		{"infrastructure ref to a machine, not a template", func(p *v1.NodePool) { p.Spec.InfrastructureTemplateRef.Kind = "SimMachine" },
			"spec.infrastructureTemplateRef.kind must be an infrastructure machine template kind, ending in 'Template'"},
		{"unknown upgrade type", func(p *v1.NodePool) { p.Spec.Management.UpgradeType = "Recreate" },
			`spec.management.upgradeType: Unsupported value: "Recreate": supported values: "Replace", "InPlace"`},
		{"unknown management update policy", func(p *v1.NodePool) { p.Spec.Management.ManagementUpdates = "Always" },
			`supported values: "OnNextRollout", "NewNodes", "Rollout"`},
		{"a name too long for a node label", func(p *v1.NodePool) {},
			"metadata.name of a NodePool must be at most 63 characters"},
		{"empty cluster name", func(p *v1.NodePool) { p.Spec.ClusterName = "" },
			"spec.clusterName: Invalid value: \"\": spec.clusterName in body should be at least 1 chars long"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := minimal(ns, fmt.Sprintf("bad-%d", i))
			if tc.name == "a name too long for a node label" {
				p.Name = strings.Repeat("w", 64)
			}
			tc.mutate(p)
			err := env.Client.Create(context.Background(), p)
			if err == nil {
				t.Fatalf("accepted; want refusal with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused with\n  %v\nwant a message containing\n  %s", err, tc.want)
			}
		})
	}
}

func TestImmutableFieldsCannotChange(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		mutate func(p *v1.NodePool)
		want   string
	}{
		{"clusterName", func(p *v1.NodePool) { p.Spec.ClusterName = "prod-2" },
			"spec.clusterName is immutable: create a new NodePool to run workers in another cluster"},
		{"upgradeType", func(p *v1.NodePool) { p.Spec.Management.UpgradeType = v1.UpgradeTypeInPlace },
			"spec.management.upgradeType is immutable: create a new NodePool to change how machines are updated"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := minimal(ns, fmt.Sprintf("immutable-%d", i))
			if err := env.Client.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			before := p.DeepCopy()
			tc.mutate(p)
			err := env.Client.Patch(ctx, p, client.MergeFrom(before))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, tc.want)
			}
			// Fields that may change still can.
			p = before.DeepCopy()
			p.Spec.Replicas = ptr.To[int32](5)
			if err := env.Client.Patch(ctx, p, client.MergeFrom(before)); err != nil {
				t.Fatalf("a mutable field could not change: %v", err)
			}
		})
	}
}

// kubectl scale goes through the scale subresource: it sets spec.replicas
// of a fixed-size pool, and an autoscaled pool refuses it with a message
// that says why and what to do instead.
func TestScaleSubresourceScalesFixedPoolsAndRefusesAutoscaledOnes(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := context.Background()
	fixed := minimal(ns, "fixed")
	if err := env.Client.Create(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	sc := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, fixed, sc); err != nil {
		t.Fatalf("reading the scale of a NodePool: %v", err)
	}
	if sc.Spec.Replicas != 3 {
		t.Errorf("scale spec.replicas = %d, want 3", sc.Spec.Replicas)
	}
	sc.Spec.Replicas = 5
	if err := env.Client.SubResource("scale").Update(ctx, fixed, client.WithSubResourceBody(sc)); err != nil {
		t.Fatalf("scaling a fixed-size pool: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(fixed), fixed); err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(fixed.Spec.Replicas, -1); got != 5 {
		t.Errorf("after scaling to 5, spec.replicas = %d", got)
	}

	auto := minimal(ns, "auto")
	auto.Spec.Replicas, auto.Spec.AutoScaling = nil, &v1.AutoScaling{Min: 1, Max: 4}
	if err := env.Client.Create(ctx, auto); err != nil {
		t.Fatal(err)
	}
	// kubectl scale patches the scale (an autoscaled pool has no
	// spec.replicas, so the API server cannot read its scale).
	err := env.Client.SubResource("scale").Patch(ctx, auto, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)),
		client.WithSubResourceBody(&autoscalingv1.Scale{}))
	const want = "spec.replicas and spec.autoScaling are mutually exclusive"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "kubectl scale included") {
		t.Fatalf("scaling an autoscaled pool: got %v, want a refusal containing %q that names kubectl scale", err, want)
	}
}
