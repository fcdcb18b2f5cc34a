package dist

import (
	"fmt"
	"path/filepath"

	"nodepool.dev/nodepool/config/prometheus"
)

// ObservabilityComponent is the kustomize Component of nodepool's alerts and
// Grafana dashboard; config/default does not include it.
const ObservabilityComponent = "config/prometheus"

// Observability are the release assets of the observability pack: the
// Component's objects (PrometheusRule and dashboard ConfigMap), the same
// rules as a plain Prometheus rule file, and the dashboard JSON.
var Observability = struct{ Manifest, Rules, Dashboard string }{
	Manifest:  "nodepool-prometheus.yaml",
	Rules:     "nodepool-alerts.rules.yaml",
	Dashboard: "nodepool-dashboard.json",
}

// writeObservability writes the observability pack's assets into out and
// returns their names.
func writeObservability(root, out, version, revision string) ([]string, error) {
	b, err := Kustomize(root, ObservabilityComponent, "")
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# nodepool %s (%s), built from %s (needs the Prometheus Operator's CRDs): kubectl apply -f %s\n",
		version, revision, ObservabilityComponent, Observability.Manifest)
	if err := writeFile(filepath.Join(out, Observability.Manifest), append([]byte(header), b...)); err != nil {
		return nil, err
	}
	rules, err := prometheus.RuleFile()
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(out, Observability.Rules), rules); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(out, Observability.Dashboard), prometheus.Dashboard); err != nil {
		return nil, err
	}
	return []string{Observability.Manifest, Observability.Rules, Observability.Dashboard}, nil
}
