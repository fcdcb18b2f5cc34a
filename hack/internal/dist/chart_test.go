package dist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/internal/k8sbin"
)

// The image the chart's defaults run (values.yaml: the repository, and the
// Chart.yaml appVersion as the tag).
const chartDefaultImage = "ghcr.io/nodepool-dev/nodepool:latest"

// helmLabels are the labels the chart adds to every object's metadata,
// which the release manifest has not.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

func testRoot(t *testing.T) string {
	t.Helper()
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := LoadChart(testRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// values parses YAML values, as helm's --values reads them.
func values(t *testing.T, y string) map[string]any {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// render renders the chart in ns with vals (YAML) into objects by
// kind/namespace/name, helm's labels taken off.
func render(t *testing.T, ns, vals string) map[string]*unstructured.Unstructured {
	t.Helper()
	b, err := RenderChart(testChart(t), ns, values(t, vals))
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, b)
	for k, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue // helm installs crds/ as they are
		}
		labels := o.GetLabels()
		if labels == nil {
			t.Errorf("%s has no labels: helm's labels are on every object", k)
			continue
		}
		for _, l := range helmLabels {
			if _, ok := labels[l]; !ok {
				t.Errorf("%s has no label %s", k, l)
			}
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
	}
	return objs
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// objects splits a manifest into objects by kind/namespace/name.
func objects(t *testing.T, b []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, doc := range docSeparator.Split(string(b), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "{}" {
			continue
		}
		// Numbers as int64, as the API machinery reads them.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		k := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		if out[k] != nil {
			t.Errorf("%s twice", k)
		}
		out[k] = u
	}
	return out
}

// kustomized is `kustomize build dir` with the nodepool image set to image.
func kustomized(t *testing.T, dir, image string) map[string]*unstructured.Unstructured {
	t.Helper()
	b, err := Kustomize(testRoot(t), dir, image)
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, b)
}

// sameObjects fails unless got and want hold the same objects, each the
// same in every field.
func sameObjects(t *testing.T, what string, got, want map[string]*unstructured.Unstructured) {
	t.Helper()
	if g, w := keys(got), keys(want); !slices.Equal(g, w) {
		t.Errorf("%s: the chart makes\n  %s\nthe manifest\n  %s", what, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
	for k, w := range want {
		g := got[k]
		if g == nil || reflect.DeepEqual(g.Object, w.Object) {
			continue
		}
		gb, _ := yaml.Marshal(g.Object)
		wb, _ := yaml.Marshal(w.Object)
		diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(wb)), B: difflib.SplitLines(string(gb)),
			FromFile: "kustomize", ToFile: "helm", Context: 2,
		})
		t.Errorf("%s: %s differs:\n%s", what, k, diff)
	}
}

func without(m map[string]*unstructured.Unstructured, drop ...string) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

func TestChartLints(t *testing.T) {
	dir := filepath.Join(testRoot(t), ChartDir)
	for name, vals := range map[string]string{
		"defaults":     "",
		"cert-manager": "certManager: {enabled: true}",
		"self-signed":  "tls: {selfSigned: true}",
		"scoped":       "controller: {shard: a, namespaces: [team-a]}\npayloadServer: {namespaces: [team-a, team-b]}",
	} {
		t.Run(name, func(t *testing.T) {
			if err := LintChart(dir, values(t, vals)); err != nil {
				t.Error(err)
			}
		})
	}
	if err := LintChart(dir, values(t, "controller: {replica: 3}")); err == nil {
		t.Error("helm lint passed a value the schema refuses")
	}
}

// With its defaults the chart installs the release manifest's objects
// (nodepool.yaml, config/default), but for the Namespace, which helm
// install --create-namespace makes; createNamespace renders it too.
func TestChartDefaultsAreTheReleaseManifest(t *testing.T) {
	want := kustomized(t, "config/default", chartDefaultImage)
	if want["Namespace//nodepool-system"] == nil {
		t.Fatal("config/default has no Namespace nodepool-system")
	}
	sameObjects(t, "defaults", render(t, ChartNamespace, ""), without(want, "Namespace//nodepool-system"))
	sameObjects(t, "createNamespace", render(t, ChartNamespace, "createNamespace: true"), want)
}

// With certManager.enabled the chart is config/cert-manager
// (nodepool-cert-manager.yaml).
func TestChartWithCertManagerIsTheCertManagerManifest(t *testing.T) {
	want := kustomized(t, "config/cert-manager", chartDefaultImage)
	sameObjects(t, "certManager", render(t, ChartNamespace, "createNamespace: true\ncertManager: {enabled: true}"), want)
}

// payloadServer.namespaces binds the payload server as
// config/payload-server/namespaced does: a RoleBinding in each listed
// namespace, no ClusterRoleBinding, and --namespaces.
func TestChartScopedPayloadServerIsTheNamespacedVariant(t *testing.T) {
	got := render(t, ChartNamespace, "payloadServer: {namespaces: [dev]}")
	server := map[string]*unstructured.Unstructured{}
	for k, o := range got {
		if o.GetLabels()["app.kubernetes.io/name"] == "nodepool-payload-server" {
			server[k] = o
		}
	}
	sameObjects(t, "payloadServer.namespaces", server, kustomized(t, "config/payload-server/namespaced", chartDefaultImage))

	got = render(t, ChartNamespace, "payloadServer: {namespaces: [team-a, team-b]}")
	for _, ns := range []string{"team-a", "team-b"} {
		if got["RoleBinding/"+ns+"/nodepool-payload-server"] == nil {
			t.Errorf("no RoleBinding of the payload server in %s", ns)
		}
	}
	if got["ClusterRoleBinding//nodepool-payload-server"] != nil {
		t.Error("a scoped payload server is bound in every namespace")
	}
	if args := containerArgs(t, got, "nodepool-payload-server"); !slices.Contains(args, "--namespaces=team-a,team-b") {
		t.Errorf("payload server args %v", args)
	}
}

// The chart's CRDs are config/crd/bases as `make generate` writes them, and
// the controller's RBAC is config/rbac/role.yaml: a stale copy fails here.
func TestChartCopiesAreTheGeneratedFiles(t *testing.T) {
	root := testRoot(t)
	bases, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("config/crd/bases: %v", err)
	}
	copies, _ := filepath.Glob(filepath.Join(root, ChartDir, "crds/*.yaml"))
	pairs := map[string]string{filepath.Join(root, "config/rbac/role.yaml"): filepath.Join(root, ChartDir, "files/role.yaml")}
	for _, b := range bases {
		pairs[b] = filepath.Join(root, ChartDir, "crds", filepath.Base(b))
	}
	if len(copies) != len(bases) {
		t.Errorf("%s/crds has %d files, config/crd/bases %d", ChartDir, len(copies), len(bases))
	}
	for src, dst := range pairs {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not %s (run make generate): %v", dst, src, err)
		}
	}
}

func containerArgs(t *testing.T, objs map[string]*unstructured.Unstructured, deployment string) []string {
	t.Helper()
	for k, o := range objs {
		if strings.HasPrefix(k, "Deployment/") && o.GetName() == deployment {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			return args
		}
	}
	t.Fatalf("no Deployment %s", deployment)
	return nil
}

func TestChartValues(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	t.Run("the digest wins over the tag", func(t *testing.T) {
		b, err := RenderChart(testChart(t), ChartNamespace, values(t, "image: {repository: r.example/np, tag: v9, digest: "+digest+"}"))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPinned(b, "r.example/np@"+digest); err != nil {
			t.Error(err)
		}
		b, err = RenderChart(testChart(t), ChartNamespace, values(t, "image: {repository: r.example/np, tag: v9}"))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckPinned(b, "r.example/np:v9"); err != nil {
			t.Error(err)
		}
	})
	t.Run("replicas, resources and a shard", func(t *testing.T) {
		got := render(t, ChartNamespace, `
controller: {replicas: 3, shard: a, namespaces: [team-a, team-b], goMemLimit: 900MiB, resources: {limits: {memory: 1Gi}}, extraArgs: [--token-ttl=8h]}
payloadServer: {replicas: 4}`)
		args := containerArgs(t, got, "nodepool-controller")
		for _, a := range []string{"--shard=a", "--namespaces=team-a,team-b", "--token-ttl=8h"} {
			if !slices.Contains(args, a) {
				t.Errorf("controller args %v lack %s", args, a)
			}
		}
		for name, want := range map[string]int64{"nodepool-controller": 3, "nodepool-payload-server": 4} {
			n, _, _ := unstructured.NestedInt64(got["Deployment/nodepool-system/"+name].Object, "spec", "replicas")
			if n != want {
				t.Errorf("%s replicas %d, want %d", name, n, want)
			}
		}
		cs, _, _ := unstructured.NestedSlice(got["Deployment/nodepool-system/nodepool-controller"].Object, "spec", "template", "spec", "containers")
		c := cs[0].(map[string]any)
		if lim, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); lim != "1Gi" {
			t.Errorf("controller memory limit %q", lim)
		}
		if env, _, _ := unstructured.NestedSlice(c, "env"); !reflect.DeepEqual(env, []any{map[string]any{"name": "GOMEMLIMIT", "value": "900MiB"}}) {
			t.Errorf("controller env %v", env)
		}
	})
	t.Run("the payload server's Service and URL", func(t *testing.T) {
		got := render(t, ChartNamespace, `
certManager: {enabled: true, dnsNames: [np.internal.example]}
payloadServer:
  url: https://nodepool.example.com:443/ignition
  service: {type: LoadBalancer, port: 443, annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb}}`)
		svc := got["Service/nodepool-system/nodepool-payload-server"]
		if typ, _, _ := unstructured.NestedString(svc.Object, "spec", "type"); typ != "LoadBalancer" {
			t.Errorf("Service type %q", typ)
		}
		if svc.GetAnnotations()["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" {
			t.Errorf("Service annotations %v", svc.GetAnnotations())
		}
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		if want := []any{map[string]any{"name": "https", "port": int64(443), "targetPort": "https"}}; !reflect.DeepEqual(ports, want) {
			t.Errorf("Service ports %v, want %v", ports, want)
		}
		if args := containerArgs(t, got, "nodepool-controller"); !slices.Contains(args, "--payload-server-url=https://nodepool.example.com:443/ignition") {
			t.Errorf("controller args %v", args)
		}
		names, _, _ := unstructured.NestedStringSlice(got["Certificate/nodepool-system/nodepool-payload-server"].Object, "spec", "dnsNames")
		for _, n := range []string{"nodepool-payload-server.nodepool-system.svc", "np.internal.example", "nodepool.example.com"} {
			if !slices.Contains(names, n) {
				t.Errorf("certificate names %v lack %s", names, n)
			}
		}
		// The default URL follows the Service's port.
		got = render(t, ChartNamespace, "payloadServer: {service: {port: 9443}}")
		if args := containerArgs(t, got, "nodepool-controller"); !slices.Contains(args, "--payload-server-url=https://nodepool-payload-server.nodepool-system.svc:9443/ignition") {
			t.Errorf("controller args %v", args)
		}
	})
	t.Run("another namespace", func(t *testing.T) {
		got := render(t, "platform", "")
		args := containerArgs(t, got, "nodepool-controller")
		for _, a := range []string{"--leader-election-namespace=platform", "--settings-namespace=platform", "--management-config=platform/management-config",
			"--payload-server-url=https://nodepool-payload-server.platform.svc:8443/ignition"} {
			if !slices.Contains(args, a) {
				t.Errorf("controller args %v lack %s", args, a)
			}
		}
		for _, p := range []string{"nodepool-controller-writes", "nodepool-payload-server-writes", "nodepool-owns-machinedeployments", "nodepool-owns-machinesets"} {
			conds, _, _ := unstructured.NestedSlice(got["ValidatingAdmissionPolicy//"+p].Object, "spec", "matchConditions")
			if expr := conds[0].(map[string]any)["expression"].(string); !strings.Contains(expr, "system:serviceaccount:platform:") {
				t.Errorf("%s matches %s", p, expr)
			}
		}
		if got["Role/platform/nodepool-controller"] == nil {
			t.Error("no Role of the controller in its namespace")
		}
	})
	t.Run("a self-signed certificate", func(t *testing.T) {
		got := render(t, ChartNamespace, "tls: {selfSigned: true}")
		s := got["Secret/nodepool-system/nodepool-payload-server-tls"]
		if s == nil {
			t.Fatal("no Secret nodepool-payload-server-tls")
		}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if v, _, _ := unstructured.NestedString(s.Object, "data", k); v == "" {
				t.Errorf("the Secret has no %s", k)
			}
		}
	})
	for name, vals := range map[string]string{
		"namespaces without a shard": "controller: {namespaces: [team-a]}",
		"an unknown value":           "controller: {replica: 3}",
		"a digest that is not one":   "image: {digest: latest}",
		"a plain http URL":           "payloadServer: {url: http://np.example/ignition}",
		"two certificate makers":     "certManager: {enabled: true}\ntls: {selfSigned: true}",
		"a Service type":             "payloadServer: {service: {type: ExternalName}}",
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, err := RenderChart(testChart(t), ChartNamespace, values(t, vals)); err == nil {
				t.Errorf("rendered with %s", vals)
			} else {
				t.Log(err)
			}
		})
	}
}

// The release's chart: its version is the release's, the image pinned by
// digest, LICENSE in it, and one commit makes one archive.
func TestPackageChart(t *testing.T) {
	o := ImageOptions{Root: testRoot(t), Out: t.TempDir(), Stamp: Stamp{Version: "v1.2.3", Created: time.Unix(1700000000, 0).UTC()}}
	tgz, err := PackageChart(o, testPinned)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(tgz) != "nodepool-1.2.3.tgz" {
		t.Errorf("packaged as %s", tgz)
	}
	first, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if err := LintChart(tgz, nil); err != nil {
		t.Error(err)
	}
	ch, err := loader.Load(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("version %s, appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
	}
	b, err := RenderChart(ch, ChartNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPinned(b, testPinned); err != nil {
		t.Error(err)
	}
	var raw string
	for _, f := range ch.Raw {
		if f.Name == "values.yaml" {
			raw = string(f.Data)
		}
	}
	if !strings.Contains(raw, "# The image both Deployments run") {
		t.Error("the packaged values.yaml lost its comments")
	}
	names := tarNames(t, first)
	if !slices.Contains(names, "nodepool/LICENSE") || !slices.Contains(names, "nodepool/crds/nodepool.dev_nodepools.yaml") {
		t.Errorf("the archive holds %v", names)
	}
	if _, err := PackageChart(o, testPinned); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(tgz); !bytes.Equal(first, again) {
		t.Error("packaging the chart twice made two archives")
	}
}

func tarNames(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}
