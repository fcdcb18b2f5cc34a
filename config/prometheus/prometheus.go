// Package prometheus carries nodepool's observability pack, the files of
// this folder: the PrometheusRule of its alerts and the Grafana dashboard,
// for `make release` (hack/internal/dist) and the tests of both
// (test/observability, test/install).
package prometheus

import (
	"bytes"
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// PrometheusRule is prometheusrule.yaml, the alerts for the Prometheus
// Operator.
//
//go:embed prometheusrule.yaml
var PrometheusRule []byte

// ServiceMonitors is servicemonitor.yaml, the Prometheus Operator's scrape
// of the controller's and the payload server's metrics Services.
//
//go:embed servicemonitor.yaml
var ServiceMonitors []byte

// Dashboard is dashboard.json, the Grafana dashboard.
//
//go:embed dashboard.json
var Dashboard []byte

// Rule is one rule of the PrometheusRule.
type Rule struct {
	Alert       string            `json:"alert,omitempty" yaml:"alert,omitempty"`
	Record      string            `json:"record,omitempty" yaml:"record,omitempty"`
	Expr        string            `json:"expr" yaml:"expr"`
	For         string            `json:"for,omitempty" yaml:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty" yaml:"annotations,omitempty"`
}

// Group is a rule group.
type Group struct {
	Name  string `json:"name" yaml:"name"`
	Rules []Rule `json:"rules" yaml:"rules"`
}

// Groups are the rule groups of the PrometheusRule.
func Groups() ([]Group, error) {
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   any    `json:"metadata"`
		Spec       struct {
			Groups []Group `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(PrometheusRule, &pr); err != nil {
		return nil, fmt.Errorf("config/prometheus/prometheusrule.yaml: %w", err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("config/prometheus/prometheusrule.yaml: a PrometheusRule with rule groups expected, got kind %q with %d groups", pr.Kind, len(pr.Spec.Groups))
	}
	return pr.Spec.Groups, nil
}

// RuleFile is the PrometheusRule's spec as a plain Prometheus rule file
// (rule_files of prometheus.yml, promtool), the same rules.
func RuleFile() ([]byte, error) {
	groups, err := Groups()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(struct {
		Groups []Group `yaml:"groups"`
	}{groups}); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	header := "# nodepool's alerts as a Prometheus rule file, the spec of config/prometheus/prometheusrule.yaml.\n"
	return append([]byte(header), b...), nil
}
