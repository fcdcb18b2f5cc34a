// Command promql-series parses PromQL expressions with Prometheus's own
// parser and says which series each one reads: for every vector selector,
// the metric name and the label names the expression needs it to have (its
// matchers, and the by/without, on/ignoring and group_left/group_right
// labels of the aggregations and binary operations around it).
//
// It reads a JSON array of {"source": "...", "expr": "..."} on standard
// input and writes a JSON array of {"source", "expr", "error", "series":
// [{"metric", "labels"}]} on standard output, one entry per expression, in
// order; an expression that does not parse has "error" set. The tests of
// config/prometheus run it (test/observability).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type query struct {
	Source string `json:"source"`
	Expr   string `json:"expr"`
}

type series struct {
	Metric string   `json:"metric"`
	Labels []string `json:"labels"`
}

type answer struct {
	Source string   `json:"source"`
	Expr   string   `json:"expr"`
	Error  string   `json:"error,omitempty"`
	Series []series `json:"series"`
}

func main() {
	var qs []query
	if err := json.NewDecoder(os.Stdin).Decode(&qs); err != nil {
		fmt.Fprintln(os.Stderr, "promql-series: reading the expressions (a JSON array of {source, expr}):", err)
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	out := make([]answer, 0, len(qs))
	for _, q := range qs {
		out = append(out, analyse(p, q))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "promql-series:", err)
		os.Exit(1)
	}
}

func analyse(p parser.Parser, q query) answer {
	a := answer{Source: q.Source, Expr: q.Expr, Series: []series{}}
	expr, err := p.ParseExpr(q.Expr)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := series{Metric: vs.Name, Labels: []string{}}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if m.Type == labels.MatchEqual {
					s.Metric = m.Value
				}
				continue
			}
			s.Labels = append(s.Labels, m.Name)
		}
		for _, n := range path {
			switch n := n.(type) {
			case *parser.AggregateExpr:
				s.Labels = append(s.Labels, n.Grouping...)
			case *parser.BinaryExpr:
				if vm := n.VectorMatching; vm != nil {
					s.Labels = append(s.Labels, vm.MatchingLabels...)
					s.Labels = append(s.Labels, vm.Include...)
				}
			}
		}
		slices.Sort(s.Labels)
		s.Labels = slices.Compact(s.Labels)
		a.Series = append(a.Series, s)
		return nil
	})
	return a
}
