package observability

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/config/prometheus"
	"nodepool.dev/nodepool/internal/k8sbin"
)

// promtoolDir writes the rules of the PrometheusRule as nodepool.rules.yaml
// beside copies of config/prometheus/tests/*.yaml, which name that file,
// and returns the folder and the test files.
func promtoolDir(t *testing.T) (string, []string) {
	t.Helper()
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules, err := prometheus.RuleFile()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nodepool.rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := filepath.Glob(filepath.Join(root, "config/prometheus/tests/*_test.yaml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("no config/prometheus/tests/*_test.yaml (%v)", err)
	}
	var names []string
	for _, f := range tests {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.Base(f))
	}
	return dir, names
}

func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(Tool(t, "PROMTOOL"), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The rules are valid (promtool check rules) and every unit test of
// config/prometheus/tests passes (promtool test rules).
func TestTheAlertsPassPromtool(t *testing.T) {
	dir, tests := promtoolDir(t)
	promtool(t, dir, "check", "rules", "nodepool.rules.yaml")
	promtool(t, dir, append([]string{"test", "rules"}, tests...)...)
}

// Every alert is tested firing (an eval_time with expected alerts) and not
// firing (one with none).
func TestEveryAlertIsTestedFiringAndNot(t *testing.T) {
	dir, tests := promtoolDir(t)
	firing, silent := map[string]bool{}, map[string]bool{}
	for _, name := range tests {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					firing[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	groups, err := prometheus.Groups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			if !firing[r.Alert] {
				t.Errorf("alert %s has no test in which it fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("alert %s has no test in which it does not fire", r.Alert)
			}
		}
	}
}

// Every alert has a severity, a summary and a runbook_url naming its entry
// in docs/alerts.md, which has a section of that name saying what it means,
// the command that shows it and what to do.
func TestEveryAlertHasARunbookEntry(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, s := range strings.Split("\n"+string(doc), "\n## ")[1:] {
		title, body, _ := strings.Cut(s, "\n")
		sections[strings.TrimSpace(title)] = body
	}
	groups, err := prometheus.Groups()
	if err != nil {
		t.Fatal(err)
	}
	const base = "https://github.com/nodepool-dev/nodepool/blob/main/docs/alerts.md#"
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a severity label, a summary or a description", r.Alert)
			}
			if want := base + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			body, ok := sections[r.Alert]
			if !ok {
				t.Errorf("docs/alerts.md has no section ## %s", r.Alert)
				continue
			}
			for _, part := range []string{"**What it means.**", "**What shows it.**", "**What to do.**"} {
				if !strings.Contains(body, part) {
					t.Errorf("docs/alerts.md ## %s does not say %s", r.Alert, part)
				}
			}
			if !strings.Contains(body, "```sh\n") {
				t.Errorf("docs/alerts.md ## %s has no command (a sh block)", r.Alert)
			}
		}
	}
}

// documentedMetric is a metric of the table of docs/reference.md#metrics
// (documentedMetrics reads that section only).
var documentedMetric = regexp.MustCompile("(?m)^\\| `([a-z_]+)`")

// documentedMetrics are the metrics of the table of docs/reference.md#metrics.
func documentedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	ref, err := os.ReadFile(filepath.Join(root, "docs/reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(ref), "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/reference.md has no section ## Metrics")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	for _, m := range documentedMetric.FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}
	return documented
}

// Every expression of the alerts and the dashboard parses, and names
// metrics docs/reference.md lists, or Prometheus's own series of a target
// (up) (test/install checks them against a real scrape). The dashboard's
// panels query the variable $datasource.
func TestEveryQueryParsesAndNamesADocumentedMetric(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedMetrics(t, root)
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range Analyse(t, qs) {
		if a.Error != "" {
			t.Errorf("%s: %s does not parse: %s", a.Source, a.Expr, a.Error)
			continue
		}
		if len(a.Series) == 0 && !strings.HasPrefix(a.Source, "panel") {
			t.Errorf("%s: %s reads no series", a.Source, a.Expr)
		}
		for _, s := range a.Series {
			if slices.Contains(PrometheusSeries, s.Metric) {
				continue // Prometheus's own, of each target
			}
			base := s.Metric
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(base, suffix); ok && documented[b] {
					base = b
				}
			}
			if !documented[base] {
				t.Errorf("%s: %s is not in the metrics table of docs/reference.md", a.Source, s.Metric)
			}
		}
	}
	d, err := ParseDashboard()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, p := range d.AllPanels() {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d is another panel's", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q has no query, or does not query ${datasource}", p.Title)
		}
	}
}

// ClusterMatcher is the matcher every selector of the dashboard has, so
// that one dashboard reads one management cluster of a Prometheus (or
// Thanos, Mimir) holding several, told apart by their cluster label.
const ClusterMatcher = `cluster=~"$cluster"`

// The dashboard has a cluster variable, listing the cluster labels of the
// controllers' series, that lets every value through when none is chosen
// (All is .*, which a Prometheus without a cluster label matches too),
// and every selector of every panel and of every other variable's query
// reads only the clusters chosen.
func TestEveryDashboardQuerySelectsTheCluster(t *testing.T) {
	d, err := ParseDashboard()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range d.Templating.List {
		if v.Name != "cluster" {
			continue
		}
		found = true
		if v.Type != "query" || !v.IncludeAll || !v.Multi || v.AllValue != ".*" {
			t.Errorf("the cluster variable is of type %q, includeAll %v, multi %v, allValue %q: want a query, All (.*) included, several chosen at once", v.Type, v.IncludeAll, v.Multi, v.AllValue)
		}
	}
	if !found {
		t.Fatal("the dashboard has no cluster variable")
	}
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range Analyse(t, qs) {
		if strings.HasPrefix(a.Source, "alert ") || a.Source == "variable cluster" {
			continue
		}
		if a.Error != "" {
			t.Errorf("%s: %s does not parse: %s", a.Source, a.Expr, a.Error)
			continue
		}
		for _, s := range a.Series {
			n++
			if !slices.Contains(s.Matchers, ClusterMatcher) {
				t.Errorf("%s: %s reads %s%v without %s", a.Source, a.Expr, s.Metric, s.Matchers, ClusterMatcher)
			}
		}
	}
	if n == 0 {
		t.Error("the dashboard's queries read no series")
	}
}

// unwatched are the metrics of docs/reference.md that no panel or alert
// reads yet (issue 42, point 2), each a gap to close: a panel or an alert
// needs the series in test/install's scrape (TestTheAlertsAndTheDashboard
// NameOnlyExportedSeries), which makes none of these yet. The list only
// shrinks: a new metric without a panel or an alert fails.
var unwatched = map[string]bool{
	"nodepool_payload_refused_total":                               true,
	"nodepool_rollout_health_failures_total":                       true,
	"nodepool_inplace_nodes_updating":                              true,
	"nodepool_inplace_nodes_updated_total":                         true,
	"nodepool_fleetrollout_predicted_completion_timestamp_seconds": true,
	"nodepool_fleetrollout_history_lists_total":                    true,
}

// Every metric of the metrics table of docs/reference.md is read by a
// dashboard panel or an alert, but those unwatched lists; an unwatched one
// that is read is taken off the list.
func TestEveryMetricHasAPanelOrAnAlert(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedMetrics(t, root)
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, a := range Analyse(t, qs) {
		for _, s := range a.Series {
			base := s.Metric
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(base, suffix); ok && documented[b] {
					base = b
				}
			}
			read[base] = true
		}
	}
	for m := range documented {
		switch {
		case !strings.HasPrefix(m, "nodepool_"):
		case read[m] && unwatched[m]:
			t.Errorf("%s is read by a panel or an alert now: take it off unwatched", m)
		case !read[m] && !unwatched[m]:
			t.Errorf("no dashboard panel and no alert reads %s", m)
		}
	}
	for m := range unwatched {
		if !documented[m] {
			t.Errorf("unwatched lists %s, which docs/reference.md's metrics table does not", m)
		}
	}
}

// metricName is a metric's name as the Go source spells it.
var metricName = regexp.MustCompile(`"(nodepool_[a-z_]+)"`)

// Every metric the controller and the payload server define (each
// "nodepool_..." string of the Go source of internal/ and cmd/) is a row
// of the metrics table of docs/reference.md.
func TestEveryMetricIsInTheReferenceTable(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedMetrics(t, root)
	defined := map[string]string{}
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricName.FindAllSubmatch(b, -1) {
				defined[string(m[1])], _ = filepath.Rel(root, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(defined) < 20 {
		t.Fatalf("found %d metrics in the source: %v", len(defined), defined)
	}
	for name, file := range defined {
		if !documented[name] {
			t.Errorf("%s (%s) is not in the metrics table of docs/reference.md", name, file)
		}
	}
}

// The check test/install makes catches what it is for: an expression that
// does not parse, a metric that is not exported, a label its series lack.
func TestAnUnexportedMetricOrLabelIsCaught(t *testing.T) {
	as := Analyse(t, []Query{
		{Source: "good", Expr: `sum by (pool) (rate(nodepool_reconcile_errors_total{stage="apply"}[5m]))`},
		{Source: "no such metric", Expr: `nodepool_no_such_metric > 0`},
		{Source: "no such label", Expr: `max by (shard) (nodepool_reconcile_errors_total)`},
		{Source: "histogram", Expr: `histogram_quantile(0.9, sum by (le) (rate(nodepool_rollout_duration_seconds_bucket[5m])))`},
		{Source: "bad", Expr: `sum by (pool (x)`},
		{Source: "target labels", Expr: `max by (job, instance) (nodepool_reconcile_errors_total) or max by (job) (up{job=~".*nodepool.*"}) == 0`},
		{Source: "no such label of up", Expr: `max by (pool) (up)`},
	})
	if as[4].Error == "" {
		t.Errorf("%q parsed", as[4].Expr)
	}
	as = append(as[:4], as[5:]...)
	e := Exported{}
	scrape := `# TYPE nodepool_reconcile_errors_total counter
nodepool_reconcile_errors_total{namespace="a",pool="p",stage="apply"} 1
# TYPE nodepool_rollout_duration_seconds histogram
nodepool_rollout_duration_seconds_bucket{initiator="spec",le="+Inf"} 1
nodepool_rollout_duration_seconds_sum{initiator="spec"} 10
nodepool_rollout_duration_seconds_count{initiator="spec"} 1
`
	if err := e.ParseScrape(strings.NewReader(scrape)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(e.Unexported(as), "\n")
	for _, want := range []string{"no such metric: nodepool_no_such_metric is not exported", `no such label: nodepool_reconcile_errors_total has no label "shard"`,
		`no such label of up: up has no label "pool"`} {
		if !strings.Contains(got, want) {
			t.Errorf("not caught: %s; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "good:") || strings.Contains(got, "histogram:") || strings.Contains(got, "target labels:") {
		t.Errorf("exported series reported:\n%s", got)
	}
}

// The Makefile builds promtool (and the Prometheus server) at the version
// hack/tools/promtool/go.mod pins, and scrape-config at the Prometheus
// Operator's version hack/tools/prometheus-operator/go.mod pins, so
// bin/<tool>-<version> is the module's.
func TestTheMakefileBuildsThePinnedPromtool(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "hack/tools/promtool/go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	inMake := regexp.MustCompile(`(?m)^PROMETHEUS_VERSION := (\S+)$`).FindSubmatch(mk)
	inMod := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/prometheus/prometheus (v\S+)`).FindSubmatch(mod)
	if inMake == nil || inMod == nil || string(inMake[1]) != string(inMod[1]) {
		t.Errorf("the Makefile's PROMETHEUS_VERSION %q is not the version hack/tools/promtool/go.mod requires %q", inMake, inMod)
	}
	mod, err = os.ReadFile(filepath.Join(root, "hack/tools/prometheus-operator/go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	inMake = regexp.MustCompile(`(?m)^PROMETHEUS_OPERATOR_VERSION := (\S+)$`).FindSubmatch(mk)
	inMod = regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/prometheus-operator/prometheus-operator (v\S+)`).FindSubmatch(mod)
	if inMake == nil || inMod == nil || string(inMake[1]) != string(inMod[1]) {
		t.Errorf("the Makefile's PROMETHEUS_OPERATOR_VERSION %q is not the version hack/tools/prometheus-operator/go.mod requires %q", inMake, inMod)
	}
}

// ksmConfig is the part of kube-state-metrics' custom resource state
// config (k8s.io/kube-state-metrics/v2/pkg/customresourcestate) that
// names the metrics and their labels.
type ksmConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Resources []struct {
			MetricNamePrefix *string             `json:"metricNamePrefix"`
			LabelsFromPath   map[string][]string `json:"labelsFromPath"`
			Metrics          []struct {
				Name           string              `json:"name"`
				LabelsFromPath map[string][]string `json:"labelsFromPath"`
				Each           struct {
					Type     string           `json:"type"`
					Gauge    *ksmMetricLabels `json:"gauge"`
					Info     *ksmMetricLabels `json:"info"`
					StateSet *struct {
						ksmMetricLabels `json:",inline"`
						LabelName       string `json:"labelName"`
					} `json:"stateSet"`
				} `json:"each"`
			} `json:"metrics"`
		} `json:"resources"`
	} `json:"spec"`
}

type ksmMetricLabels struct {
	LabelsFromPath map[string][]string `json:"labelsFromPath"`
}

// ksmCommentMetric is a metric the config's comment names:
// "#   name{label, label}".
var ksmCommentMetric = regexp.MustCompile(`(?m)^#\s+(kube_[a-z_]+)(?:\{([a-z_, ]+)\})?$`)

// The kube-state-metrics config makes the metrics its comment says, with
// the labels it says: kube-state-metrics names each metric
// <metricNamePrefix>_<name>, the prefix kube_customresource when unset
// (customresourcestate.Resource.GetMetricNamePrefix and fullName).
func TestTheKubeStateMetricsConfigMakesTheMetricsItsCommentNames(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "config/kube-state-metrics/nodepool-custom-resource-state.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c ksmConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Kind != "CustomResourceStateMetrics" || len(c.Spec.Resources) != 1 {
		t.Fatalf("kind %q with %d resources", c.Kind, len(c.Spec.Resources))
	}
	made := map[string][]string{}
	r := c.Spec.Resources[0]
	prefix := "kube_customresource"
	if r.MetricNamePrefix != nil {
		prefix = *r.MetricNamePrefix
	}
	for _, m := range r.Metrics {
		name := m.Name
		if prefix != "" {
			name = prefix + "_" + m.Name
		}
		var labels []string
		add := func(l *ksmMetricLabels) {
			if l == nil {
				return
			}
			for k := range l.LabelsFromPath {
				labels = append(labels, k)
			}
		}
		for k := range m.LabelsFromPath {
			labels = append(labels, k)
		}
		add(m.Each.Gauge)
		add(m.Each.Info)
		if s := m.Each.StateSet; s != nil {
			add(&s.ksmMetricLabels)
			labels = append(labels, s.LabelName)
		}
		slices.Sort(labels)
		made[name] = labels
	}
	said := map[string][]string{}
	for _, m := range ksmCommentMetric.FindAllSubmatch(b, -1) {
		var labels []string
		for _, l := range strings.Split(string(m[2]), ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		said[string(m[1])] = labels
	}
	if !reflect.DeepEqual(made, said) {
		t.Errorf("the config makes\n  %v\nits comment says\n  %v", made, said)
	}
	for name := range made {
		if !strings.HasPrefix(name, "kube_customresource_nodepool_") {
			t.Errorf("%s is not a kube_customresource_nodepool_ metric", name)
		}
	}
}
