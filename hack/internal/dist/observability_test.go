package dist

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"

	"nodepool.dev/nodepool/config/prometheus"
	"nodepool.dev/nodepool/internal/k8sbin"
)

var observabilityObjects = []string{
	"PrometheusRule/nodepool-system/nodepool",
	"ServiceMonitor/nodepool-system/nodepool-controller",
	"ServiceMonitor/nodepool-system/nodepool-payload-server",
	"ConfigMap/nodepool-system/nodepool-grafana-dashboard",
}

// config/prometheus builds alone (the release's nodepool-prometheus.yaml)
// to the PrometheusRule, the ServiceMonitors and the dashboard ConfigMap, whose label Grafana's
// sidecar looks for and whose data is dashboard.json.
func TestTheObservabilityComponentShipsTheRulesAndTheDashboard(t *testing.T) {
	_, objs := build(t, ObservabilityComponent, "")
	if got := keys(objs); !slices.Equal(got, sortedClone(observabilityObjects)) {
		t.Fatalf("kustomize build %s makes %v, want %v", ObservabilityComponent, got, sortedClone(observabilityObjects))
	}
	cm := objs["ConfigMap/nodepool-system/nodepool-grafana-dashboard"]
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard: \"1\"", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if data["nodepool.json"] != string(prometheus.Dashboard) {
		t.Errorf("the ConfigMap's nodepool.json is not config/prometheus/dashboard.json")
	}
	groups, err := prometheus.Groups()
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedSlice(objs["PrometheusRule/nodepool-system/nodepool"].Object, "spec", "groups")
	if len(spec) != len(groups) {
		t.Errorf("the PrometheusRule has %d groups, prometheus.Groups %d", len(spec), len(groups))
	}
}

// The way docs/alerts.md adds the pack: a kustomization with config/default
// as a resource and config/prometheus as a component.
func TestTheObservabilityComponentAddsToTheDefaultInstall(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := configFS(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteFile("/mine/kustomization.yaml", []byte("resources:\n  - ../config/default\ncomponents:\n  - ../config/prometheus\n")); err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/mine")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range m.Resources() {
		got = append(got, r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName())
	}
	slices.Sort(got)
	want := sortedClone(append(slices.Clone(defaultObjects), observabilityObjects...))
	if !slices.Equal(got, want) {
		t.Errorf("config/default with the component makes\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func sortedClone(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
