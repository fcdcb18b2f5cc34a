package inputs

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestComponentsAreDesignTable pins the table of components: each
// component's class and delivery. Changing a row changes what rolls nodes.
func TestComponentsAreDesignTable(t *testing.T) {
	want := map[string]string{
		"release":                 "rollout",
		"user-configs":            "rollout",
		"pull-secret-ref":         "rollout",
		"pull-secret":             "management/fresh",
		"trust-bundle-ref":        "rollout",
		"trust-bundle":            "management/fresh",
		"proxy":                   "rollout",
		"proxy-defaults":          "management/pinned",
		"registry-mirrors":        "rollout",
		"registry-overrides":      "management/pinned",
		"apiserver-endpoint":      "rollout",
		"apiserver-proxy":         "management/pinned",
		"payload-server":          "management/fresh",
		"renderer":                "management/pinned",
		"infrastructure-template": "rollout",
	}
	got := map[string]string{}
	for _, c := range Components() {
		s := string(c.Class())
		if c.Delivery() != "" {
			s += "/" + string(c.Delivery())
		}
		got[c.Name()] = s
	}
	if len(got) != len(want) {
		t.Errorf("got %d components, want %d", len(got), len(want))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("component %s: got %q, want %q", name, got[name], w)
		}
	}
}

// TestEveryComponentHasExactlyOneClass checks the invariants every
// component must hold, whatever its row.
func TestEveryComponentHasExactlyOneClass(t *testing.T) {
	kebab := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, c := range Components() {
		if !kebab.MatchString(c.Name()) {
			t.Errorf("component %q: name is not kebab-case", c.Name())
		}
		if seen[c.Name()] {
			t.Errorf("component %q: listed twice", c.Name())
		}
		seen[c.Name()] = true
		switch c.Class() {
		case ClassRollout:
			if c.Delivery() != "" {
				t.Errorf("rollout component %q has a delivery %q", c, c.Delivery())
			}
		case ClassManagement:
			if c.Delivery() != DeliveryPinned && c.Delivery() != DeliveryFresh {
				t.Errorf("management component %q has delivery %q, want pinned or fresh", c, c.Delivery())
			}
		default:
			t.Errorf("component %q has no class", c)
		}
	}
}

// TestComponentTableIsExhaustive reads this package's source: every
// component built by rollout() or management() must be in the table, and no
// Component may be built any other way, so none can lack a class.
func TestComponentTableIsExhaustive(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	constructed := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name == "rollout" || n.Name.Name == "management" {
					return false // the constructors themselves
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "rollout" || id.Name == "management") {
					lit, ok := n.Args[0].(*ast.BasicLit)
					if !ok {
						t.Errorf("%s: component name must be a string literal", fset.Position(n.Pos()))
						return true
					}
					name, _ := strconv.Unquote(lit.Value)
					constructed[name] = true
				}
			case *ast.CompositeLit:
				// Component{} is the zero value, "no component": it has no
				// name either, and nothing accepts it.
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "Component" && len(n.Elts) > 0 {
					t.Errorf("%s: a Component literal outside rollout() and management() could lack a class", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	inTable := map[string]bool{}
	for _, c := range Components() {
		inTable[c.Name()] = true
	}
	for name := range constructed {
		if !inTable[name] {
			t.Errorf("component %q is constructed but not in the table", name)
		}
	}
	if len(constructed) != len(inTable) {
		t.Errorf("%d components constructed, %d in the table", len(constructed), len(inTable))
	}
}

func TestComponentEncodesAsName(t *testing.T) {
	m := map[Component]string{Release: "a", PullSecret: "b"}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"pull-secret":"b","release":"a"}` {
		t.Errorf("got %s", b)
	}
	var back map[Component]string
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back[Release] != "a" || back[PullSecret] != "b" {
		t.Errorf("round trip: %v", back)
	}
	for c := range back {
		if c.Class() == "" {
			t.Errorf("decoded component %q has no class", c)
		}
	}
	if err := json.Unmarshal([]byte(`{"no-such-thing":"x"}`), &back); err == nil || !strings.Contains(err.Error(), "unknown payload component") {
		t.Errorf("unknown name: got %v", err)
	}
	if _, err := (Component{}).MarshalText(); err == nil {
		t.Error("the zero Component encoded")
	}
}
