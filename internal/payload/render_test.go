package payload_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/inputs/inputstest"
	"nodepool.dev/nodepool/internal/payload"
)

func render(t testing.TB, w *inputstest.World) (*payload.Payload, payload.Hashes) {
	t.Helper()
	p, h, err := payload.Render(w.MustGather(t))
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return p, h
}

func TestRenderedPayloadCarriesItsIdentity(t *testing.T) {
	p, h := render(t, inputstest.New())
	if p.Hash != h.Payload || len(h.Payload) != 64 || len(h.Rollout) != 64 || len(h.RolloutWithoutVersion) != 64 {
		t.Fatalf("hashes %+v, payload hash %s", h, p.Hash)
	}
	booted, err := payload.Inspect(p.Ignition)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if booted.Pool != "workers" || booted.Hash != p.Hash {
		t.Errorf("booted %+v", booted)
	}
	wantLabels := map[string]string{nodepoolv1.LabelPool: "workers", nodepoolv1.LabelPayload: p.Hash[:payload.ShortHashLength]}
	if len(booted.NodeLabels) != 2 || booted.NodeLabels[nodepoolv1.LabelPool] != "workers" || booted.NodeLabels[nodepoolv1.LabelPayload] != wantLabels[nodepoolv1.LabelPayload] {
		t.Errorf("node labels %v, want %v", booted.NodeLabels, wantLabels)
	}
	for k, v := range booted.NodeLabels {
		if len(v) > 63 {
			t.Errorf("label %s value %q is longer than 63", k, v)
		}
	}
	if len(booted.Manifest) != len(inputs.Components()) || len(payload.Diff(booted.Manifest, p.Manifest)) != 0 {
		t.Errorf("manifest on the node %v differs from %v", booted.Manifest, p.Manifest)
	}
	for c, f := range p.Fragments {
		if p.Manifest[c] != payload.Digest(f) {
			t.Errorf("component %s: digest %s does not match its fragment", c, p.Manifest[c])
		}
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	a, ha := render(t, inputstest.New())
	b, hb := render(t, inputstest.New())
	if !bytes.Equal(a.Ignition, b.Ignition) || ha != hb {
		t.Error("the same inputs rendered two different payloads")
	}
}

// TestPayloadContents checks what lands on a node, file by file.
func TestPayloadContents(t *testing.T) {
	p, _ := render(t, inputstest.New())
	var cfg igntypes.Config
	if err := json.Unmarshal(p.Ignition, &cfg); err != nil {
		t.Fatal(err)
	}
	files := map[string]igntypes.File{}
	for _, f := range cfg.Storage.Files {
		files[f.Path] = f
	}
	content := func(path string) string {
		f, ok := files[path]
		if !ok {
			t.Fatalf("no file %s", path)
		}
		src := *f.Contents.Source
		if b64, ok := strings.CutPrefix(src, "data:;base64,"); ok {
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		return src
	}
	contains := func(path string, want ...string) {
		t.Helper()
		c := content(path)
		for _, w := range want {
			if !strings.Contains(c, w) {
				t.Errorf("%s does not contain %q:\n%s", path, w, c)
			}
		}
	}
	contains(payload.ReleasePath, `"version": "v1.36.3"`, `"image": "registry.example/os@sha256:`)
	contains("/etc/chrony.conf", "time.corp.example")
	contains(payload.PullSecretPath, `"auths"`)
	if m := *files[payload.PullSecretPath].Mode; m != 0o600 {
		t.Errorf("pull secret mode %o, want 600", m)
	}
	contains(payload.TrustBundlePath, "BEGIN CERTIFICATE")
	contains(payload.ProxyEnvPath, `HTTPS_PROXY="http://proxy.corp.example:3128"`, `NODEPOOL_OWNER_NO_PROXY=".corp.example,10.0.0.0/8"`)
	contains(payload.ProxyDefaultsEnvPath, `NODEPOOL_DEFAULT_NO_PROXY=".cluster.local,.platform.example,.svc,10.128.0.0/14,127.0.0.1,169.254.169.254,172.30.0.0/16,localhost"`)
	contains(payload.RegistryMirrorsPath, "prefix = \"docker.io\"\nlocation = \"docker.io\"\n\n[[registry.mirror]]\nlocation = \"mirror.corp.example/dockerhub\"")
	contains(payload.RegistryOverridesPath, "prefix = \"quay.io/openshift\"", "location = \"mirror.platform.example/openshift\"")
	contains(payload.APIServerProxyConfigPath, "server control-plane api.prod-1.example:6443", "bind 127.0.0.1:6443")
	contains(payload.APIServerProxyManifestPath, "image: registry.example/haproxy@sha256:", "path: /etc/kubernetes/apiserver-proxy")
	contains(payload.PayloadServerPath, "https://payload.nodepool-system.example:8443/ignition", "BEGIN CERTIFICATE")
	contains(payload.RendererPath, `"version": "v0.1.0"`)
	contains(payload.InfrastructureTemplatePath, `"kind": "SimMachineTemplate"`, `"spec": "sha256:`)
	contains(payload.ManifestPath, `"pool": "workers"`, `"payload": "`+p.Hash+`"`, `"apiserver-proxy": "sha256:`)
	if got := cfg.KernelArguments.ShouldExist; len(got) != 2 {
		t.Errorf("kernel arguments %v", got)
	}
}

func TestUnsetInputsRenderEmptyFragments(t *testing.T) {
	w := inputstest.New()
	w.Pool.Spec.Config, w.Pool.Spec.PullSecretRef, w.Pool.Spec.AdditionalTrustBundleRef = nil, nil, nil
	w.Pool.Spec.Proxy, w.Pool.Spec.RegistryMirrors = nil, nil
	w.Management.Data["config"] = "apiServerProxyImage: registry.example/haproxy:2.9\n"
	p, _ := render(t, w)
	empty := `{"ignition":{"config":{"replace":{"verification":{}}},"proxy":{},"security":{"tls":{}},"timeouts":{},"version":"3.5.0"},"kernelArguments":{},"passwd":{},"storage":{},"systemd":{}}`
	for _, c := range []inputs.Component{inputs.UserConfigs, inputs.PullSecretRef, inputs.PullSecret, inputs.TrustBundleRef, inputs.TrustBundle, inputs.Proxy, inputs.RegistryMirrors, inputs.RegistryOverrides} {
		if string(p.Fragments[c]) != empty {
			t.Errorf("component %s: fragment %s, want an empty config", c, p.Fragments[c])
		}
	}
	if string(p.Fragments[inputs.ProxyDefaults]) == empty {
		t.Error("proxy defaults are rendered even without a proxy, so enabling one later changes only the proxy component")
	}
}

// TestUserConfigCannotOverwriteNodepoolFiles: the owner is told which
// ConfigMap and document to fix.
func TestUserConfigCannotOverwriteNodepoolFiles(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{"ignition: {version: 3.5.0}\nstorage: {files: [{path: /var/lib/kubelet/config.json, contents: {source: 'data:,x'}}]}\n",
			"document 1 declares path /var/lib/kubelet/config.json, which nodepool renders for component pull-secret"},
		{"ignition: {version: 3.5.0}\nstorage: {files: [{path: /etc/nodepool/manifest.json}]}\n",
			"which nodepool renders for its node identity"},
		{"ignition: {version: 3.5.0}\nsystemd: {units: [{name: kubelet.service, dropins: [{name: 20-nodepool-labels.conf, contents: \"[Service]\\n\"}]}]}\n",
			"declares drop-in kubelet.service/20-nodepool-labels.conf"},
	} {
		w := inputstest.New()
		w.UserConfigs = append(w.UserConfigs, inputstest.ConfigMap("bad", tt.config))
		w.Pool.Spec.Config = append(w.Pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: "bad"})
		_, _, err := payload.Render(w.MustGather(t))
		var ce *inputs.ConfigError
		if !errors.As(err, &ce) || ce.Reason != nodepoolv1.ReasonInvalidConfig || ce.Object != inputstest.Key("bad") {
			t.Errorf("got %v, want an InvalidConfig error on ConfigMap bad", err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %q does not say %q", err, tt.want)
		}
	}
}

// TestUserConfigMayAddToNodepoolUnits: drop-ins of their own on units
// nodepool also extends are fine.
func TestUserConfigMayAddToNodepoolUnits(t *testing.T) {
	w := inputstest.New()
	w.UserConfigs = append(w.UserConfigs, inputstest.ConfigMap("kubelet", "ignition: {version: 3.5.0}\nsystemd: {units: [{name: kubelet.service, dropins: [{name: 30-mine.conf, contents: \"[Service]\\n\"}]}]}\n"))
	w.Pool.Spec.Config = append(w.Pool.Spec.Config, nodepoolv1.LocalObjectReference{Name: "kubelet"})
	p, _ := render(t, w)
	if !bytes.Contains(p.Ignition, []byte("30-mine.conf")) || !bytes.Contains(p.Ignition, []byte(payload.KubeletLabelsDropin)) {
		t.Error("both drop-ins should be in the payload")
	}
}
