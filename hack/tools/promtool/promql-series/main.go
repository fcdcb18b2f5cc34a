// Command promql-series parses PromQL expressions with Prometheus's own
// parser and says which series each one reads: for every vector selector,
// the metric name and the label names the expression needs it to have (its
// matchers, and the by/without, on/ignoring and group_left/group_right
// labels of the aggregations and binary operations around it).
//
// It reads a JSON array of {"source": "...", "expr": "..."} on standard
// input and writes a JSON array of {"source", "expr", "error", "series":
// [{"metric", "labels", "matchers"}], "operands"} on standard output, one
// entry per expression, in order; an expression that does not parse has
// "error" set. matchers are the selector's label matchers as PromQL writes
// them (cluster=~"$cluster"), the metric name's left out; operands are
// what the expression compares with a threshold, each as PromQL (of
// `max by (pool) (x) > 0 or absent(y)`: `max by (pool) (x)` and
// `absent(y)`), so a test can see the series an alert would name whether
// it fires or not. The tests of config/prometheus run it
// (test/observability).
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
	Metric   string   `json:"metric"`
	Labels   []string `json:"labels"`
	Matchers []string `json:"matchers"`
}

type answer struct {
	Source   string   `json:"source"`
	Expr     string   `json:"expr"`
	Error    string   `json:"error,omitempty"`
	Series   []series `json:"series"`
	Operands []string `json:"operands"`
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
		s := series{Metric: vs.Name, Labels: []string{}, Matchers: []string{}}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if m.Type == labels.MatchEqual {
					s.Metric = m.Value
				}
				continue
			}
			s.Labels = append(s.Labels, m.Name)
			s.Matchers = append(s.Matchers, m.String())
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
	a.Operands = operands(expr)
	return a
}

// operands are what expr compares with a threshold: the sides of and, or
// and unless, each without a comparison with a number; expr itself when
// it compares nothing.
func operands(expr parser.Expr) []string {
	switch e := expr.(type) {
	case *parser.ParenExpr:
		return operands(e.Expr)
	case *parser.BinaryExpr:
		switch {
		case e.Op == parser.LAND || e.Op == parser.LOR || e.Op == parser.LUNLESS:
			return append(operands(e.LHS), operands(e.RHS)...)
		case e.Op.IsComparisonOperator() && isNumber(e.RHS):
			return operands(e.LHS)
		case e.Op.IsComparisonOperator() && isNumber(e.LHS):
			return operands(e.RHS)
		}
	}
	return []string{expr.String()}
}

func isNumber(e parser.Expr) bool {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	_, ok := e.(*parser.NumberLiteral)
	return ok
}
