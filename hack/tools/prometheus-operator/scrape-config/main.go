// Command scrape-config writes the Prometheus configuration the Prometheus
// Operator generates for ServiceMonitors: the operator's own generator
// (github.com/prometheus-operator/prometheus-operator/pkg/prometheus,
// ConfigGenerator.GenerateServerConfiguration), run as the operator runs it
// for a Prometheus object that selects them, so its scrape_configs are the
// jobs a cluster's Prometheus would scrape them with.
//
// It reads ServiceMonitors (YAML documents, as kubectl applies them) on
// standard input and writes the configuration on standard output. Flags:
// -prometheus-version, the version of Prometheus the configuration is for
// (the operator adapts it); -namespace, the Prometheus object's namespace.
// test/install runs it (test/observability.OperatorConfig) and scrapes
// nodepool with a real Prometheus and the jobs it writes.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus-operator/prometheus-operator/pkg/assets"
	prompkg "github.com/prometheus-operator/prometheus-operator/pkg/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	version := flag.String("prometheus-version", "", "the Prometheus version the configuration is for (e.g. v3.16.0)")
	namespace := flag.String("namespace", "monitoring", "the Prometheus object's namespace")
	flag.Parse()
	out, err := generate(os.Stdin, *version, *namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scrape-config:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}

func generate(in io.Reader, version, namespace string) ([]byte, error) {
	if version == "" {
		return nil, errors.New("-prometheus-version is required")
	}
	sMons := map[string]*monitoringv1.ServiceMonitor{}
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(in))
	defer dec.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := dec.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		doc := bytes.TrimSpace(buf[:n])
		if len(doc) == 0 {
			continue
		}
		var sm monitoringv1.ServiceMonitor
		if err := yaml.UnmarshalStrict(doc, &sm); err != nil {
			return nil, fmt.Errorf("a ServiceMonitor: %w", err)
		}
		if sm.Kind != monitoringv1.ServiceMonitorsKind {
			continue
		}
		// The key the operator gives a selected ServiceMonitor (its
		// resource selector's namespace/name).
		sMons[sm.Namespace+"/"+sm.Name] = &sm
	}
	if len(sMons) == 0 {
		return nil, errors.New("no ServiceMonitor on standard input")
	}
	// A Prometheus object that selects every ServiceMonitor in every
	// namespace, as kube-prometheus-stack's does with its selectors
	// emptied; nothing else set but what the API server defaults (the
	// CRD's defaults of scrapeInterval and evaluationInterval).
	p := &monitoringv1.Prometheus{
		TypeMeta:   metav1.TypeMeta{Kind: monitoringv1.PrometheusesKind, APIVersion: monitoring.GroupName + "/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "k8s", Namespace: namespace},
		Spec: monitoringv1.PrometheusSpec{
			CommonPrometheusFields: monitoringv1.CommonPrometheusFields{
				Version:                         version,
				ScrapeInterval:                  "30s",
				ServiceMonitorSelector:          &metav1.LabelSelector{},
				ServiceMonitorNamespaceSelector: &metav1.LabelSelector{},
			},
			EvaluationInterval: "30s",
		},
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cg, err := prompkg.NewConfigGenerator(logger, p, prompkg.WithEndpointSliceSupport())
	if err != nil {
		return nil, err
	}
	return cg.GenerateServerConfiguration(p, sMons, nil, nil, nil, assets.NewTestStoreBuilder(), nil, nil, nil, nil)
}
