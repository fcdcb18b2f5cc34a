// Package observability checks nodepool's observability pack
// (config/prometheus): its alerts pass their promtool unit tests, every
// alert has a runbook entry, and every PromQL expression of the alerts and
// the Grafana dashboard parses (Prometheus's parser) and names only series
// nodepool exports. test/install compares those names with a real scrape of
// the controller and the payload server.
//
// The tools are built from hack/tools/promtool by `make test` (or `make
// promtool`), which names them in PROMTOOL and PROMQL_SERIES.
package observability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"nodepool.dev/nodepool/config/prometheus"
)

// Tool is the path in the environment variable env (PROMTOOL or
// PROMQL_SERIES); the test fails when it is unset.
func Tool(t testing.TB, env string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Fatalf("%s is not set: run make test, or make promtool and then %s=bin/<tool>-<version> go test (the Makefile names it)", env, env)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v (make promtool builds it)", env, bin, err)
	}
	return bin
}

// Query is one PromQL expression of the pack and where it is.
type Query struct {
	Source string `json:"source"`
	Expr   string `json:"expr"`
}

// Series is a series an expression reads: its metric name and the labels
// the expression needs it to have.
type Series struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
	// Matchers are the selector's label matchers as PromQL writes them
	// (namespace=~"$namespace"), the metric name's left out.
	Matchers []string `json:"matchers"`
}

// Answer is what promql-series says of a query.
type Answer struct {
	Query
	Error  string   `json:"error"`
	Series []Series `json:"series"`
	// Operands are what the expression compares with a threshold (the
	// sides of and, or and unless, without the comparison), as PromQL:
	// evaluated, they show the series an alert would name, firing or not.
	Operands []string `json:"operands"`
}

// grafanaIntervals are Grafana's interval variables, which Grafana
// replaces before a query reaches Prometheus; the parser gets what a 1m
// scrape interval gives.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// labelValues is a Grafana variable query label_values(expr, label).
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// Queries are the expressions of every alert and of every panel and
// variable of the dashboard.
func Queries() ([]Query, error) {
	groups, err := prometheus.Groups()
	if err != nil {
		return nil, err
	}
	var qs []Query
	for _, g := range groups {
		for _, r := range g.Rules {
			qs = append(qs, Query{Source: "alert " + r.Alert, Expr: r.Expr})
		}
	}
	d, err := ParseDashboard()
	if err != nil {
		return nil, err
	}
	for _, p := range d.AllPanels() {
		for _, tg := range p.Targets {
			qs = append(qs, Query{Source: fmt.Sprintf("panel %q (%s)", p.Title, tg.RefID), Expr: grafanaIntervals.Replace(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("dashboard variable %s: query %s: %w", v.Name, v.Query, err)
			}
			q = obj.Query
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("dashboard variable %s: query %q is not label_values(expr, label)", v.Name, q)
		}
		qs = append(qs, Query{Source: "variable " + v.Name, Expr: fmt.Sprintf("group by (%s) (%s)", m[2], m[1])})
	}
	return qs, nil
}

// Dashboard is the part of the Grafana dashboard the tests read.
type Dashboard struct {
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
			// Query is a string or {"query": "..."}.
			Query      json.RawMessage `json:"query"`
			IncludeAll bool            `json:"includeAll"`
			Multi      bool            `json:"multi"`
			AllValue   string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel (a row holds panels too).
type Panel struct {
	ID         int     `json:"id"`
	Type       string  `json:"type"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// ParseDashboard reads config/prometheus/dashboard.json.
func ParseDashboard() (*Dashboard, error) {
	d := &Dashboard{}
	if err := json.Unmarshal(prometheus.Dashboard, d); err != nil {
		return nil, fmt.Errorf("config/prometheus/dashboard.json: %w", err)
	}
	return d, nil
}

// AllPanels are the dashboard's panels, those of rows included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Analyse runs promql-series (PROMQL_SERIES) on the queries.
func Analyse(t testing.TB, qs []Query) []Answer {
	t.Helper()
	in, err := json.Marshal(qs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Tool(t, "PROMQL_SERIES"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promql-series: %v\n%s", err, stderr.String())
	}
	var as []Answer
	if err := json.Unmarshal(out, &as); err != nil {
		t.Fatalf("promql-series said %s: %v", out, err)
	}
	if len(as) != len(qs) {
		t.Fatalf("promql-series answered %d of %d queries", len(as), len(qs))
	}
	return as
}

// Exported is what a scrape exports: each series name (a histogram's
// _bucket, _sum and _count) with the label names its series carry.
type Exported map[string]map[string]bool

// TargetLabels are the labels Prometheus gives every series it scrapes
// (the target's), which a scrape does not show: job and instance, and the
// ones the Prometheus Operator's scrape config for a ServiceMonitor (how
// nodepool ships its scrape) adds, namespace, service, pod, container and
// endpoint. With honorLabels a series' own label of the same name wins.
var TargetLabels = []string{"job", "instance", "namespace", "service", "pod", "container", "endpoint"}

// SelectorLabels are labels the dashboard's selectors match with a
// pattern their absence matches too (cluster=~"$cluster", All being .*):
// a multi-cluster store (Thanos, Mimir) adds them, a scrape does not.
var SelectorLabels = []string{"cluster"}

// PrometheusSeries are the series Prometheus makes itself for each target
// it scrapes, with TargetLabels only.
var PrometheusSeries = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling", "scrape_series_added"}

// ParseScrape reads a /metrics body (Prometheus text format) into e.
func (e Exported) ParseScrape(r io.Reader) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return err
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName())
			}
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				e.add(name+"_bucket", append(slices.Clone(ls), "le"))
				e.add(name+"_sum", ls)
				e.add(name+"_count", ls)
			case dto.MetricType_SUMMARY:
				e.add(name, append(slices.Clone(ls), "quantile"))
				e.add(name+"_sum", ls)
				e.add(name+"_count", ls)
			default:
				e.add(name, ls)
			}
		}
	}
	return nil
}

func (e Exported) add(name string, labels []string) {
	if e[name] == nil {
		e[name] = map[string]bool{}
	}
	for _, l := range labels {
		e[name][l] = true
	}
}

// Unexported lists, for each answer, the metrics it names that e lacks
// and the labels it needs that their series do not carry.
func (e Exported) Unexported(as []Answer) []string {
	var out []string
	for _, a := range as {
		for _, s := range a.Series {
			if slices.Contains(PrometheusSeries, s.Metric) {
				for _, l := range s.Labels {
					if !slices.Contains(TargetLabels, l) {
						out = append(out, fmt.Sprintf("%s: %s has no label %q (Prometheus gives it %v)", a.Source, s.Metric, l, TargetLabels))
					}
				}
				continue
			}
			labels, ok := e[s.Metric]
			if !ok {
				out = append(out, fmt.Sprintf("%s: %s is not exported", a.Source, s.Metric))
				continue
			}
			for _, l := range s.Labels {
				if !labels[l] && !slices.Contains(TargetLabels, l) && !slices.Contains(SelectorLabels, l) {
					have := make([]string, 0, len(labels))
					for k := range labels {
						have = append(have, k)
					}
					sort.Strings(have)
					out = append(out, fmt.Sprintf("%s: %s has no label %q (it has %v)", a.Source, s.Metric, l, have))
				}
			}
		}
	}
	return out
}
