package dist

import (
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/yaml"

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

// Every ServiceMonitor nodepool ships (config/prometheus, and the chart's
// with monitoring.serviceMonitor.enabled, in any namespace) is one the
// Prometheus Operator reads (its own types, strictly), and honours the
// scraped labels on each endpoint: the operator adds the target label
// namespace (the Service's), which would otherwise rename each per-pool
// series' own namespace to exported_namespace.
func TestEveryServiceMonitorHonoursTheScrapedLabels(t *testing.T) {
	shipped := map[string]map[string]*unstructured.Unstructured{}
	_, shipped[ObservabilityComponent] = build(t, ObservabilityComponent, "")
	shipped["the chart"] = render(t, ChartNamespace, "monitoring: {serviceMonitor: {enabled: true}}")
	shipped["the chart in another namespace"] = render(t, "platform", "monitoring: {serviceMonitor: {enabled: true, interval: 1m, labels: {release: kube-prometheus-stack}}}")
	for from, objs := range shipped {
		n := 0
		for k, o := range objs {
			if o.GetKind() != monitoringv1.ServiceMonitorsKind {
				continue
			}
			n++
			j, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var sm monitoringv1.ServiceMonitor
			if err := yaml.UnmarshalStrict(j, &sm); err != nil {
				t.Errorf("%s: %s is no ServiceMonitor of the Prometheus Operator's: %v", from, k, err)
				continue
			}
			if sm.APIVersion != monitoringv1.SchemeGroupVersion.String() {
				t.Errorf("%s: %s is %s, want %s", from, k, sm.APIVersion, monitoringv1.SchemeGroupVersion)
			}
			if len(sm.Spec.Endpoints) == 0 {
				t.Errorf("%s: %s has no endpoint", from, k)
			}
			for i, e := range sm.Spec.Endpoints {
				if !e.HonorLabels {
					t.Errorf("%s: %s endpoint %d (port %s) does not set honorLabels: true", from, k, i, e.Port)
				}
			}
		}
		if n != 2 {
			t.Errorf("%s ships %d ServiceMonitors, want 2 (the controller's and the payload server's)", from, n)
		}
	}
}
