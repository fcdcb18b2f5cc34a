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

// outputFormats are kubectl's printers for -o: json, yaml, kyaml, name
// and the jsonpath ones (jsonpath=, jsonpath-as-json=, jsonpath-file=).
// Go templates are left out: text/template's method calls keep every
// exported method of every type in the binary (some 10 MB more).
type outputFormats struct {
	jsonYaml *genericclioptions.JSONYamlPrintFlags
	name     *genericclioptions.NamePrintFlags
	jsonPath *genericclioptions.JSONPathPrintFlags
}

func newOutputFormats() outputFormats {
	return outputFormats{
		jsonYaml: genericclioptions.NewJSONYamlPrintFlags(),
		name:     genericclioptions.NewNamePrintFlags(""),
		jsonPath: genericclioptions.NewJSONPathPrintFlags("", true),
	}
}

// allowed lists the formats, as kubectl's --help and errors do.
func (f outputFormats) allowed() []string {
	var out []string
	out = append(out, f.jsonYaml.AllowedFormats()...)
	out = append(out, f.name.AllowedFormats()...)
	return append(out, f.jsonPath.AllowedFormats()...)
}

// printer returns the printer of format, as genericclioptions.PrintFlags
// picks one.
func (f outputFormats) printer(format string) (printers.ResourcePrinter, error) {
	if p, err := f.jsonYaml.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	if p, err := f.name.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	if p, err := f.jsonPath.ToPrinter(format); !genericclioptions.IsNoCompatiblePrinterError(err) {
		return p, err
	}
	return nil, genericclioptions.NoCompatiblePrinterError{OutputFormat: &format, AllowedFormats: f.allowed()}
}

// checkOutput refuses an -o no printer handles, naming what is allowed.
func (o *Options) checkOutput() error {
	if o.tabular() {
		return nil
	}
	f := newOutputFormats()
	if _, err := f.printer(o.Output); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return fmt.Errorf("--output %q is not supported: use table, wide, %s (jsonpath takes its template after =, as kubectl's -o does)",
				o.Output, strings.Join(f.allowed(), ", "))
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
// names: json and yaml print it as it is, jsonpath runs on its JSON, name
// prints objects (kind.group/name, as kubectl does).
func (o *Options) printStructured(v any, objects ...object) error {
	p, err := newOutputFormats().printer(o.Output)
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
