package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
)

// table is rows under a header, printed aligned as kubectl prints.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) print(w io.Writer) error {
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Output formats of -o besides kubectl's printers: the table (the default)
// and the wide table (every column).
const (
	outputTable = "table"
	outputWide  = "wide"
)

// tabular reports whether -o asks for text: table or wide.
func (o *Options) tabular() bool {
	return o.Output == outputTable || o.Output == outputWide || o.Output == ""
}

// wide reports whether -o wide asks for every column.
func (o *Options) wide() bool { return o.Output == outputWide }

// printFlags are kubectl's printers for -o: json, yaml, name, jsonpath=,
// jsonpath-as-json=, jsonpath-file=, go-template= and go-template-file=.
func (o *Options) printFlags() *genericclioptions.PrintFlags {
	pf := genericclioptions.NewPrintFlags("")
	pf.OutputFormat = &o.Output
	return pf
}

// checkOutput refuses an -o no printer handles, naming what is allowed.
func (o *Options) checkOutput() error {
	if o.tabular() {
		return nil
	}
	pf := o.printFlags()
	if _, err := pf.ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return fmt.Errorf("--output %q is not supported: use table, wide, %s (jsonpath and go-template take their template after =, as kubectl's -o does)",
				o.Output, strings.Join(pf.AllowedFormats(), ", "))
		}
		return fmt.Errorf("--output %q: %w", o.Output, err)
	}
	return nil
}

// object names what a result is about, for -o name: kind NodePool or
// FleetRollout and its name.
type object struct{ kind, name string }

func poolObject(name string) object         { return object{kind: "NodePool", name: name} }
func fleetRolloutObject(name string) object { return object{kind: "FleetRollout", name: name} }

// printStructured prints v, the command's result, with the printer -o
// names: json and yaml print it as it is, jsonpath and go-template run on
// its JSON, name prints objects (kind.group/name, as kubectl does).
func (o *Options) printStructured(v any, objects ...object) error {
	p, err := o.printFlags().ToPrinter()
	if err != nil {
		return err
	}
	if _, ok := p.(*printers.NamePrinter); ok {
		if len(objects) == 0 {
			return fmt.Errorf("-o name: this command's result names no object: use json, yaml or jsonpath")
		}
		for _, obj := range objects {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(nodepoolv1.GroupVersion.WithKind(obj.kind))
			u.SetName(obj.name)
			if err := p.PrintObj(u, o.out()); err != nil {
				return err
			}
		}
		return nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return p.PrintObj(&runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}, o.out())
}

// age is how long ago t was, as kubectl prints ages ("5m", "3h12m").
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
