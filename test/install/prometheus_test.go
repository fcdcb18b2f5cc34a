package install

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/config/prometheus"
	"nodepool.dev/nodepool/test/observability"
)

// scrapeInterval is the test's: the shipped ServiceMonitors' 30s would
// make it wait minutes for the two samples a rate needs.
const scrapeInterval = "1s"

// checkWithAnOperatorPrometheus scrapes the running controller and
// payload server replicas with a real Prometheus through the jobs the
// Prometheus Operator generates for the shipped ServiceMonitors
// (config/prometheus/servicemonitor.yaml, run through the operator's own
// generator: observability.OperatorConfig), then evaluates every alert
// expression, each part of it an alert compares with a threshold, and
// every dashboard query and variable, with $namespace the pools'
// namespace ns. A per-pool series must name a pool that exists (its own
// namespace, not the Service's: honorLabels), no series may carry an
// exported_ label, a dashboard query filtered by namespace must find the
// pools, and the alerts on nodepool itself must see its targets.
//
// Only the service discovery is stood in for: the test's processes are no
// pods behind Endpoints, so each job's kubernetes_sd_configs becomes the
// targets Kubernetes' endpoints discovery would find for the shipped
// Services (observability.StaticDiscovery), with its meta labels; the
// jobs' relabelings, honor_labels and the rest are the operator's.
func checkWithAnOperatorPrometheus(t *testing.T, ns string, answers []observability.Answer, replicas map[string][]*replica) {
	start := time.Now()
	defer func() { t.Logf("the real Prometheus' part took %s", time.Since(start).Round(100*time.Millisecond)) }()
	shippedConfig := observability.OperatorConfig(t, prometheus.ServiceMonitors)
	fast := bytes.ReplaceAll(prometheus.ServiceMonitors, []byte("interval: 30s"), []byte("interval: "+scrapeInterval))
	if bytes.Equal(fast, prometheus.ServiceMonitors) {
		t.Fatal("config/prometheus/servicemonitor.yaml sets no interval: 30s for the test to shorten")
	}
	config := observability.OperatorConfig(t, fast)
	if back := bytes.ReplaceAll(config, []byte("scrape_interval: "+scrapeInterval), []byte("scrape_interval: 30s")); !bytes.Equal(back, shippedConfig) {
		t.Fatalf("the operator's configuration for the ServiceMonitors with interval %s differs from the shipped ones' by more than the interval:\n%s\nshipped:\n%s", scrapeInterval, config, shippedConfig)
	}
	if !bytes.Contains(config, []byte("honor_labels: true")) {
		t.Logf("the operator's jobs do not honour the scraped labels:\n%s", config)
	}
	endpoints := endpointsOfShippedServices(t, replicas)
	prom := observability.StartPrometheus(t, observability.StaticDiscovery(t, config, endpoints))

	// Every replica is a target of its job, up, and scraped thrice (a rate
	// needs two samples).
	want := len(replicas[controllerName]) + len(replicas[payloadName])
	var targets []observability.Target
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		if targets, err = prom.Targets(); err != nil {
			t.Fatal(err)
		}
		scraped, err := prom.Query("count_over_time(up[5m]) >= 3")
		if err != nil {
			t.Fatal(err)
		}
		if len(targets) == want && len(scraped) == want && !slices.ContainsFunc(targets, func(tg observability.Target) bool { return tg.Health != "up" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has %d targets (want %d), %d scraped thrice: %+v", len(targets), want, len(scraped), targets)
		}
		time.Sleep(time.Second)
	}
	for _, tg := range targets {
		if tg.Labels["namespace"] != systemNamespace || tg.Labels["endpoint"] != "metrics" || tg.Labels["pod"] == "" ||
			(!strings.Contains(tg.Labels["job"], controllerName) && !strings.Contains(tg.Labels["job"], payloadName)) {
			t.Errorf("target %s has labels %v: want namespace %s, endpoint metrics, a pod and a job naming the Service", tg.ScrapePool, tg.Labels, systemNamespace)
		}
	}

	pools := &nodepoolv1.NodePoolList{}
	if err := env.Client.List(context.Background(), pools); err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, p := range pools.Items {
		exists[p.Namespace+"/"+p.Name] = true
	}
	vars := strings.NewReplacer("$namespace", ns, "${namespace}", ns, "$cluster", ".*", "${cluster}", ".*")
	// check evaluates one expression and says what is wrong with its
	// result; it returns the series.
	check := func(source, expr string) []map[string]string {
		expr = vars.Replace(expr)
		got, err := prom.Query(expr)
		if err != nil {
			t.Errorf("%s: %s: %v", source, expr, err)
			return nil
		}
		for _, s := range got {
			for k := range s {
				if strings.HasPrefix(k, "exported_") {
					t.Errorf("%s: %s returns %v: the scraped label %s was renamed (honorLabels)", source, expr, s, strings.TrimPrefix(k, "exported_"))
				}
			}
			if pool, ok := s["pool"]; ok && !exists[s["namespace"]+"/"+pool] {
				t.Errorf("%s: %s returns %v: no pool %s in namespace %q", source, expr, s, pool, s["namespace"])
			}
		}
		return got
	}
	for _, a := range answers {
		reads := func(metric, label string) bool {
			return slices.ContainsFunc(a.Series, func(s observability.Series) bool {
				return (metric == "" || s.Metric == metric) && (label == "" || slices.Contains(s.Labels, label))
			})
		}
		// An alert on every pool's series (no matcher: not only halted
		// rollouts, say) or on the targets (up) must see some.
		unfiltered := !slices.ContainsFunc(a.Series, func(s observability.Series) bool { return len(s.Matchers) > 0 })
		got := check(a.Source, a.Expr)
		switch {
		case strings.HasPrefix(a.Source, "alert "):
			for _, op := range a.Operands {
				got := check(a.Source+" (what it compares)", op)
				switch {
				case strings.HasPrefix(op, "absent("):
					if len(got) > 0 {
						t.Errorf("%s: %s: the series it looks for are not found (%v)", a.Source, op, got)
					}
				case len(got) == 0 && ((reads("", "pool") && unfiltered) || reads("up", "")):
					t.Errorf("%s: %s finds no series", a.Source, vars.Replace(op))
				}
			}
		case a.Source == "variable namespace":
			if !slices.ContainsFunc(got, func(s map[string]string) bool { return s["namespace"] == ns }) {
				t.Errorf("%s: %s does not list the pools' namespace %s: %v", a.Source, vars.Replace(a.Expr), ns, got)
			}
		case slices.ContainsFunc(a.Series, func(s observability.Series) bool { return slices.Contains(s.Matchers, `namespace=~"$namespace"`) }):
			if len(got) == 0 {
				t.Errorf("%s: %s finds nothing with namespace %s chosen", a.Source, vars.Replace(a.Expr), ns)
			}
		}
	}
}

// endpointsOfShippedServices are the addresses Kubernetes' endpoints
// discovery finds for each port of each shipped Service: a replica of the
// Deployment the Service selects, at the container port its targetPort
// names, with the discovery's meta labels of the endpoint, the Service
// and the pod.
func endpointsOfShippedServices(t *testing.T, replicas map[string][]*replica) []observability.Endpoint {
	t.Helper()
	var out []observability.Endpoint
	for _, u := range shipped {
		if u.GetKind() != "Service" {
			continue
		}
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
			t.Fatal(err)
		}
		for _, d := range shipped {
			if d.GetKind() != "Deployment" || d.GetNamespace() != svc.Namespace {
				continue
			}
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &dep); err != nil {
				t.Fatal(err)
			}
			if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
				continue
			}
			rs, ok := replicas[dep.Name]
			if !ok {
				t.Fatalf("no replicas of %s, which Service %s selects", dep.Name, svc.Name)
			}
			for _, sp := range svc.Spec.Ports {
				container, port := containerPort(dep, sp)
				if port == nil {
					t.Fatalf("Service %s port %s: no container port of %s is its target %s", svc.Name, sp.Name, dep.Name, sp.TargetPort.String())
				}
				for _, r := range rs {
					addr := r.Addrs[port.Name]
					if addr == "" {
						t.Fatalf("replica %s has no address for port %s", r.Name, port.Name)
					}
					l := map[string]string{
						"__meta_kubernetes_namespace":                    svc.Namespace,
						"__meta_kubernetes_endpoints_name":               svc.Name,
						"__meta_kubernetes_endpoint_ready":               "true",
						"__meta_kubernetes_endpoint_port_name":           sp.Name,
						"__meta_kubernetes_endpoint_port_protocol":       string(corev1.ProtocolTCP),
						"__meta_kubernetes_endpoint_address_target_kind": "Pod",
						"__meta_kubernetes_endpoint_address_target_name": r.Name,
						"__meta_kubernetes_service_name":                 svc.Name,
						"__meta_kubernetes_pod_name":                     r.Name,
						"__meta_kubernetes_pod_ip":                       "127.0.0.1",
						"__meta_kubernetes_pod_ready":                    "true",
						"__meta_kubernetes_pod_phase":                    string(corev1.PodRunning),
						"__meta_kubernetes_pod_container_name":           container,
						"__meta_kubernetes_pod_container_port_name":      port.Name,
						"__meta_kubernetes_pod_container_port_number":    fmt.Sprint(port.ContainerPort),
						"__meta_kubernetes_pod_container_port_protocol":  string(corev1.ProtocolTCP),
						"__meta_kubernetes_pod_controller_kind":          "ReplicaSet",
						"__meta_kubernetes_pod_controller_name":          dep.Name + "-0",
					}
					observability.MetaLabels(l, "__meta_kubernetes_service_label_", "__meta_kubernetes_service_labelpresent_", svc.Labels)
					observability.MetaLabels(l, "__meta_kubernetes_service_annotation_", "__meta_kubernetes_service_annotationpresent_", svc.Annotations)
					observability.MetaLabels(l, "__meta_kubernetes_endpoints_label_", "__meta_kubernetes_endpoints_labelpresent_", svc.Labels)
					observability.MetaLabels(l, "__meta_kubernetes_pod_label_", "__meta_kubernetes_pod_labelpresent_", dep.Spec.Template.Labels)
					observability.MetaLabels(l, "__meta_kubernetes_pod_annotation_", "__meta_kubernetes_pod_annotationpresent_", dep.Spec.Template.Annotations)
					out = append(out, observability.Endpoint{Address: addr, Labels: l})
				}
			}
		}
	}
	return out
}

// containerPort is the container and port of d a Service port targets.
func containerPort(d appsv1.Deployment, sp corev1.ServicePort) (string, *corev1.ContainerPort) {
	for _, c := range d.Spec.Template.Spec.Containers {
		for i, p := range c.Ports {
			if (sp.TargetPort.StrVal != "" && p.Name == sp.TargetPort.StrVal) || (sp.TargetPort.StrVal == "" && int(p.ContainerPort) == sp.TargetPort.IntValue()) {
				return c.Name, &c.Ports[i]
			}
		}
	}
	return "", nil
}
