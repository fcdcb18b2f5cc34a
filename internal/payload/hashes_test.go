package payload_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
)

// TestGoldenHashes pins the three hashes of the full input of inputstest.New.
//
// If this test fails, a change altered what the hashes are computed over.
// An accidental change of the rollout hash rolls every node of every pool
// of every user at the next reconcile after an upgrade of nodepool; a
// change of the payload hash makes every pool report management drift.
// Do not update these values unless that is the intent, it is written in
// the release notes, and a migration keeps running pools from rolling.
func TestGoldenHashes(t *testing.T) {
	_, h := render(t, inputstest.New())
	want := payload.Hashes{
		Rollout:               "db31fb1475d2c43b093aa26212d68ca2f6f31d39002c51e412503c70d86f0aec",
		RolloutWithoutVersion: "e1c8df2a2c1754555253a3e6b3ebce4cdacd000de33fb7eb7e1bf02c31b164ad",
		Payload:               "31d125f5d9e9e9208e6d77d76a5bd98d0206f5ba23f968be3d85a8528e6e28f0",
	}
	if h != want {
		t.Errorf("hashes changed (read the comment of this test before you update them):\ngot  %#v\nwant %#v", h, want)
	}
}

// TestClassification changes one input at a time and checks which of the
// three hashes change and in which payload components the latest payload
// differs: the table of components and classes as a test. Every component must appear.
func TestClassification(t *testing.T) {
	const (
		none    = ""
		payld   = "payload"
		version = "rollout,payload"
		all     = "rollout,rolloutWithoutVersion,payload"
	)
	tests := []struct {
		name       string
		mutate     func(w *inputstest.World)
		hashes     string
		components string
	}{
		// Owner intent: rollout components.
		{"release version", func(w *inputstest.World) { w.Pool.Spec.Release.Version = "v1.36.4" }, version, "release"},
		{"release image", func(w *inputstest.World) { w.Pool.Spec.Release.Image = "registry.example/os:2" }, all, "release"},
		{"user config content", func(w *inputstest.World) {
			w.UserConfigs[0].Data["config"] = strings.Replace(inputstest.ChronyConfig, "time.corp.example", "time2.corp.example", 1)
		}, all, "user-configs"},
		{"a user config added", func(w *inputstest.World) {
			w.UserConfigs = append(w.UserConfigs, inputstest.ConfigMap("more", "ignition: {version: 3.5.0}\nsystemd: {units: [{name: x.service, mask: true}]}\n"))
			w.Pool.Spec.Config = append(w.Pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: "more"})
		}, all, "user-configs"},
		{"pull secret reference (same content)", func(w *inputstest.World) {
			w.PullSecret.Name, w.Pool.Spec.PullSecretRef.Name = "pull-secret-2", "pull-secret-2"
		}, all, "pull-secret-ref"},
		{"trust bundle reference (same content)", func(w *inputstest.World) {
			w.TrustBundle.Name, w.Pool.Spec.AdditionalTrustBundleRef.Name = "corp-ca-2", "corp-ca-2"
		}, all, "trust-bundle-ref"},
		{"proxy as written", func(w *inputstest.World) { w.Pool.Spec.Proxy.HTTPSProxy = "https://proxy.corp.example:3129" }, all, "proxy"},
		{"proxy noProxy as written", func(w *inputstest.World) {
			w.Pool.Spec.Proxy.NoProxy = append(w.Pool.Spec.Proxy.NoProxy, ".other.example")
		}, all, "proxy"},
		{"registry mirrors", func(w *inputstest.World) {
			w.Pool.Spec.RegistryMirrors[0].Mirrors = []string{"mirror3.corp.example/org"}
		}, all, "registry-mirrors"},
		{"API-server endpoint host", func(w *inputstest.World) { w.Cluster.Spec.ControlPlaneEndpoint.Host = "api2.prod-1.example" }, all, "apiserver-endpoint"},
		{"API-server endpoint port", func(w *inputstest.World) { w.Cluster.Spec.ControlPlaneEndpoint.Port = 443 }, all, "apiserver-endpoint"},
		{"infrastructure template spec", func(w *inputstest.World) {
			w.Template.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"cpus": int64(4), "memory": "4Gi"}}}
		}, all, "infrastructure-template"},

		// Platform: management components.
		{"pull secret content", func(w *inputstest.World) {
			w.PullSecret.Data[".dockerconfigjson"] = []byte(`{"auths":{"registry.example":{"auth":"cm90YXRlZA=="}}}`)
		}, payld, "pull-secret"},
		{"trust bundle content", func(w *inputstest.World) { w.TrustBundle.Data["ca-bundle.crt"] = string(inputstest.PayloadServerCA) }, payld, "trust-bundle"},
		{"cluster pod network", func(w *inputstest.World) { w.Cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"10.132.0.0/14"} }, payld, "proxy-defaults"},
		{"cluster service network", func(w *inputstest.World) {
			w.Cluster.Spec.ClusterNetwork.Services.CIDRBlocks = append(w.Cluster.Spec.ClusterNetwork.Services.CIDRBlocks, "fd02::/112")
		}, payld, "proxy-defaults"},
		{"cluster service domain", func(w *inputstest.World) { w.Cluster.Spec.ClusterNetwork.ServiceDomain = "prod.local" }, payld, "proxy-defaults"},
		{"management metadata address", func(w *inputstest.World) { w.Management.Data["config"] += "metadataAddress: 169.254.169.253\n" }, payld, "proxy-defaults"},
		{"management extra noProxy", func(w *inputstest.World) {
			w.Management.Data["config"] = strings.Replace(w.Management.Data["config"], "[.platform.example]", "[.platform.example, .more.example]", 1)
		}, payld, "proxy-defaults"},
		{"management registry overrides", func(w *inputstest.World) {
			w.Management.Data["config"] = strings.Replace(w.Management.Data["config"], "mirror.platform.example", "mirror2.platform.example", 1)
		}, payld, "registry-overrides"},
		{"management API-server proxy image", func(w *inputstest.World) {
			w.Management.Data["config"] = strings.Replace(w.Management.Data["config"], "sha256:aaaa", "sha256:bbbb", 1)
		}, payld, "apiserver-proxy"},
		{"payload server URL", func(w *inputstest.World) { w.Settings.PayloadServerURL = "https://payload2.example/ignition" }, payld, "payload-server"},
		{"payload server CA", func(w *inputstest.World) { w.Settings.PayloadServerCA = []byte(inputstest.TrustBundlePEM) }, payld, "payload-server"},
		{"renderer version (a nodepool upgrade)", func(w *inputstest.World) { w.Settings.RendererVersion = "v0.2.0" }, payld, "renderer"},

		// Neither: what is propagated in place, and what means nothing.
		{"node labels", func(w *inputstest.World) { w.Pool.Spec.NodeLabels = map[string]nodepoolv1.LabelValue{"a": "b"} }, none, ""},
		{"taints", func(w *inputstest.World) { w.Pool.Spec.Taints = nil }, none, ""},
		{"replicas", func(w *inputstest.World) { w.Pool.Spec.Replicas = ptr.To[int32](10) }, none, ""},
		{"drain timeout", func(w *inputstest.World) { w.Pool.Spec.NodeDrainTimeout = &metav1.Duration{Duration: time.Minute} }, none, ""},
		{"volume detach timeout", func(w *inputstest.World) {
			w.Pool.Spec.NodeVolumeDetachTimeout = &metav1.Duration{Duration: time.Minute}
		}, none, ""},
		{"auto repair", func(w *inputstest.World) {
			w.Pool.Spec.Management.AutoRepair = &nodepoolv1.AutoRepair{UnhealthyTimeout: &metav1.Duration{Duration: time.Minute}}
		}, none, ""},
		{"management policy", func(w *inputstest.World) {
			w.Pool.Spec.Management.ManagementUpdates = nodepoolv1.ManagementUpdatesNewNodes
			w.Pool.Spec.Management.PausedUntil = "true"
		}, none, ""},
		{"order of spec.config", func(w *inputstest.World) { slices.Reverse(w.Pool.Spec.Config) }, none, ""},
		{"order of registry mirrors and noProxy", func(w *inputstest.World) {
			slices.Reverse(w.Pool.Spec.RegistryMirrors)
			slices.Reverse(w.Pool.Spec.Proxy.NoProxy)
		}, none, ""},
		{"user config reformatted", func(w *inputstest.World) {
			w.UserConfigs[0].Data["config"] = `{"systemd": {"units": [{"enabled": true, "name": "chronyd.service"}]},
 "storage": {"files": [{"overwrite": true, "path": "/etc/chrony.conf", "contents": {"source": "data:,server%20time.corp.example%20iburst%0A"}, "mode": 420}]},
 "ignition": {"version": "3.4.0"}}`
		}, none, ""},
		{"a document moved to another ConfigMap", func(w *inputstest.World) {
			docs := strings.SplitN(inputstest.TuningConfig, "---\n", 2)
			w.UserConfigs[0].Data["config"] = inputstest.ChronyConfig + "---\n" + docs[1]
			w.UserConfigs[1].Data["config"] = docs[0]
		}, none, ""},
		{"MachineConfig metadata", func(w *inputstest.World) {
			w.UserConfigs[1].Data["config"] = strings.Replace(inputstest.TuningConfig, "name: 50-tuning", "name: 60-tuning", 1)
		}, none, ""},
		{"infrastructure template renamed, same spec", func(w *inputstest.World) {
			w.Template.SetName("small-copy")
			w.Pool.Spec.InfrastructureTemplateRef.Name = "small-copy"
		}, none, ""},
		{"management config reformatted", func(w *inputstest.World) {
			w.Management.Data["config"] = "# the platform's settings\nnoProxy: [.platform.example, .platform.example]\n" + w.Management.Data["config"][:strings.Index(w.Management.Data["config"], "noProxy")]
		}, none, ""},
	}

	base, baseHashes := render(t, inputstest.New())
	covered := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := inputstest.New()
			tt.mutate(w)
			p, h := render(t, w)
			var changed []string
			if h.Rollout != baseHashes.Rollout {
				changed = append(changed, "rollout")
			}
			if h.RolloutWithoutVersion != baseHashes.RolloutWithoutVersion {
				changed = append(changed, "rolloutWithoutVersion")
			}
			if h.Payload != baseHashes.Payload {
				changed = append(changed, "payload")
			}
			if got := strings.Join(changed, ","); got != tt.hashes {
				t.Errorf("changed hashes %q, want %q", got, tt.hashes)
			}
			if got := components(payload.Diff(base.Manifest, p.Manifest)); got != tt.components {
				t.Errorf("changed components %q, want %q", got, tt.components)
			}
		})
		covered[tt.components] = true
	}
	for _, c := range inputs.Components() {
		if !covered[c.Name()] {
			t.Errorf("component %s has no row of its own in the classification table", c)
		}
	}
}

// TestIntentCoversEveryRolloutComponent: every rollout component has a
// canonical intent, and no management component does.
func TestIntentCoversEveryRolloutComponent(t *testing.T) {
	in := inputstest.New().MustGather(t)
	for _, c := range inputs.Components() {
		b, err := in.Intent(c, true)
		switch {
		case c.IsRollout() && (err != nil || b == nil):
			t.Errorf("rollout component %s: intent %s, %v", c, b, err)
		case !c.IsRollout() && err == nil:
			t.Errorf("management component %s has an intent: %s", c, b)
		}
	}
}
