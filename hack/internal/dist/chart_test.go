package dist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
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
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	return renderOf(t, testChart(t), ns, vals)
}

// renderOf is render of the chart ch.
func renderOf(t *testing.T, ch *chart.Chart, ns, vals string) map[string]*unstructured.Unstructured {
	t.Helper()
	b, err := RenderChart(ch, ns, values(t, vals))
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
		"monitoring":   "monitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}",
		// What helm passes a dependency.
		"global": "global: {imagePullSecrets: [regcred]}",
		"scheduled": "imagePullSecrets: [{name: regcred}]\ncontroller: {priorityClassName: high, nodeSelector: {a: b}, tolerations: [{operator: Exists}], podAnnotations: {a: b}}\n" +
			"payloadServer: {affinity: {}, topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}",
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

// payloadServer.mirrors false with namespaces binds the payload server as
// config/payload-server/namespaced does: a RoleBinding in each listed
// namespace, no ClusterRoleBinding, and --namespaces; without namespaces,
// as config/payload-server/every-namespace, the layout before mirrors.
func TestChartScopedPayloadServerIsTheNamespacedVariant(t *testing.T) {
	serverOf := func(got map[string]*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		server := map[string]*unstructured.Unstructured{}
		for k, o := range got {
			if o.GetLabels()["app.kubernetes.io/name"] == "nodepool-payload-server" {
				server[k] = o
			}
		}
		return server
	}
	every := render(t, ChartNamespace, "payloadServer: {mirrors: false}")
	sameObjects(t, "payloadServer.mirrors false", serverOf(every), kustomized(t, "config/payload-server/every-namespace", chartDefaultImage))
	if args := containerArgs(t, every, "nodepool-controller"); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--mirror-namespace") }) {
		t.Errorf("without mirrors the controller still writes them: %v", args)
	}
	got := render(t, ChartNamespace, "payloadServer: {mirrors: false, namespaces: [dev]}")
	server := map[string]*unstructured.Unstructured{}
	for k, o := range got {
		if o.GetLabels()["app.kubernetes.io/name"] == "nodepool-payload-server" {
			server[k] = o
		}
	}
	sameObjects(t, "payloadServer.namespaces", server, kustomized(t, "config/payload-server/namespaced", chartDefaultImage))

	got = render(t, ChartNamespace, "payloadServer: {mirrors: false, namespaces: [team-a, team-b]}")
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

// The chart's CRDs are config/crd/bases as `make generate` writes them, the
// controller's RBAC is config/rbac/role.yaml, and its alerts and dashboard
// are config/prometheus's: a stale copy fails here.
func TestChartCopiesAreTheGeneratedFiles(t *testing.T) {
	root := testRoot(t)
	bases, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("config/crd/bases: %v", err)
	}
	copies, _ := filepath.Glob(filepath.Join(root, ChartDir, "crds/*.yaml"))
	pairs := map[string]string{
		filepath.Join(root, "config/rbac/role.yaml"):                 filepath.Join(root, ChartDir, "files/role.yaml"),
		filepath.Join(root, "config/prometheus/prometheusrule.yaml"): filepath.Join(root, ChartDir, "files/prometheusrule.yaml"),
		filepath.Join(root, "config/prometheus/dashboard.json"):      filepath.Join(root, ChartDir, "files/dashboard.json"),
	}
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
		for _, p := range []string{"nodepool-controller-writes", "nodepool-payload-server-writes", "nodepool-owns-machinedeployments", "nodepool-owns-machinesets", "nodepool-owns-machinesets-deletion"} {
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
		"a toleration not in a list": "controller: {tolerations: {operator: Exists}}",
		"a nodeSelector number":      "payloadServer: {nodeSelector: {disks: 2}}",
		"a pull secret as a string":  "imagePullSecrets: [regcred]",
		"a monitoring switch":        "monitoring: {serviceMonitor: {enable: true}}",
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

// umbrella writes a parent chart that depends on the checkout's chart
// through file://, with vals as its values.yaml, runs `helm dependency
// update` on it (helm's library: charts/ gets the packaged chart and
// Chart.lock is written) and returns its folder and the loaded chart.
func umbrella(t *testing.T, vals string) (string, *chart.Chart) {
	t.Helper()
	dir, home := t.TempDir(), t.TempDir()
	chartYAML := fmt.Sprintf("apiVersion: v2\nname: platform\ndescription: An umbrella chart.\nversion: 1.0.0\ndependencies:\n  - name: nodepool\n    version: %q\n    repository: file://%s\n",
		testChart(t).Metadata.Version, filepath.Join(testRoot(t), ChartDir))
	if err := os.Mkdir(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{"Chart.yaml": chartYAML, "values.yaml": vals, "templates/NOTES.txt": "The platform's charts.\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settings := cli.New()
	settings.RepositoryConfig = filepath.Join(home, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(home, "repository")
	settings.ContentCache = filepath.Join(home, "content")
	m := &downloader.Manager{
		Out:              io.Discard,
		ChartPath:        dir,
		SkipUpdate:       true,
		Getters:          getter.All(settings),
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
		ContentCache:     settings.ContentCache,
	}
	if err := m.Update(); err != nil {
		t.Fatalf("helm dependency update: %v", err)
	}
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if deps := ch.Dependencies(); len(deps) != 1 || deps[0].Name() != "nodepool" {
		t.Fatalf("the umbrella chart holds %v", deps)
	}
	return dir, ch
}

// The chart as a dependency of another (an umbrella chart, file://): helm
// passes it the umbrella's global values, which its schema takes; with
// none of its own values set it installs what it installs alone (the
// release manifest), and global.imagePullSecrets (names or {name: ...})
// reach both Deployments before its own imagePullSecrets.
func TestChartIsADependency(t *testing.T) {
	want := without(kustomized(t, "config/default", chartDefaultImage), "Namespace//nodepool-system")
	dir, ch := umbrella(t, "global:\n  clusterDomain: cluster.local\n")
	if err := LintChart(dir, nil); err != nil {
		t.Errorf("helm lint --strict of the umbrella: %v", err)
	}
	sameObjects(t, "as a dependency", renderOf(t, ch, ChartNamespace, ""), want)

	_, ch = umbrella(t, `
global:
  imagePullSecrets: [regcred, {name: mirror}]
nodepool:
  imagePullSecrets: [{name: own}]
  controller: {replicas: 3}
`)
	got := renderOf(t, ch, ChartNamespace, "")
	for _, name := range []string{"nodepool-controller", "nodepool-payload-server"} {
		spec := podSpec(t, got, name)
		if want := []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "mirror"}, {Name: "own"}}; !reflect.DeepEqual(spec.ImagePullSecrets, want) {
			t.Errorf("%s: imagePullSecrets %v, want %v", name, spec.ImagePullSecrets, want)
		}
	}
	if n, _, _ := unstructured.NestedInt64(got["Deployment/nodepool-system/nodepool-controller"].Object, "spec", "replicas"); n != 3 {
		t.Errorf("the umbrella's nodepool.controller.replicas 3 gave %d", n)
	}
}

// podSpec is the pod template of the Deployment name.
func podSpec(t *testing.T, objs map[string]*unstructured.Unstructured, name string) (spec corev1.PodSpec) {
	t.Helper()
	var d appsv1.Deployment
	for k, o := range objs {
		if strings.HasPrefix(k, "Deployment/") && o.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if want := map[string]string{"app.kubernetes.io/name": name}; !reflect.DeepEqual(d.Spec.Template.Labels, want) || !reflect.DeepEqual(d.Spec.Selector.MatchLabels, want) {
				t.Errorf("%s: pod labels %v, selector %v: want both %v", k, d.Spec.Template.Labels, d.Spec.Selector.MatchLabels, want)
			}
			return d.Spec.Template.Spec
		}
	}
	t.Fatalf("no Deployment %s", name)
	return
}

// The scheduling values of each Deployment (the controller's and the
// payload server's, each its own) reach its pod template: annotations,
// nodeSelector, tolerations, affinity, topologySpreadConstraints,
// priorityClassName; imagePullSecrets reach both.
func TestChartSchedulesBothDeployments(t *testing.T) {
	scheduling := func(name, priority string) string {
		return fmt.Sprintf(`
  podAnnotations: {example.com/owner: %[1]s}
  nodeSelector: {example.com/pool: %[1]s}
  tolerations: [{key: example.com/%[1]s, operator: Exists, effect: NoSchedule}]
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: %[1]s}}}
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app.kubernetes.io/name: %[1]s}}}
  priorityClassName: %[2]s`, name, priority)
	}
	got := render(t, ChartNamespace, "imagePullSecrets: [{name: regcred}]\ncontroller:"+scheduling("nodepool-controller", "system-cluster-critical")+
		"\npayloadServer:"+scheduling("nodepool-payload-server", "nodepool-boot"))
	for name, priority := range map[string]string{"nodepool-controller": "system-cluster-critical", "nodepool-payload-server": "nodepool-boot"} {
		spec := podSpec(t, got, name)
		if spec.PriorityClassName != priority {
			t.Errorf("%s: priorityClassName %q, want %q", name, spec.PriorityClassName, priority)
		}
		if !reflect.DeepEqual(spec.NodeSelector, map[string]string{"example.com/pool": name}) {
			t.Errorf("%s: nodeSelector %v", name, spec.NodeSelector)
		}
		if want := []corev1.Toleration{{Key: "example.com/" + name, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}; !reflect.DeepEqual(spec.Tolerations, want) {
			t.Errorf("%s: tolerations %v, want %v", name, spec.Tolerations, want)
		}
		if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/name"] != name {
			t.Errorf("%s: affinity %+v", name, a)
		}
		if c := spec.TopologySpreadConstraints; len(c) != 1 || c[0].TopologyKey != "topology.kubernetes.io/zone" || c[0].WhenUnsatisfiable != corev1.ScheduleAnyway ||
			c[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] != name {
			t.Errorf("%s: topologySpreadConstraints %+v", name, c)
		}
		if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(spec.ImagePullSecrets, want) {
			t.Errorf("%s: imagePullSecrets %v, want %v", name, spec.ImagePullSecrets, want)
		}
		ann, _, _ := unstructured.NestedStringMap(got["Deployment/nodepool-system/"+name].Object, "spec", "template", "metadata", "annotations")
		if !reflect.DeepEqual(ann, map[string]string{"example.com/owner": name}) {
			t.Errorf("%s: pod annotations %v", name, ann)
		}
	}
}

// With its three monitoring switches the chart adds the objects of
// config/prometheus (the release's nodepool-prometheus.yaml), the same in
// every field: the ServiceMonitors, the PrometheusRule and the dashboard
// ConfigMap; each switch adds its own, with the labels it is given (a
// Prometheus Operator's or Grafana's selector).
func TestChartMonitoringIsTheObservabilityComponent(t *testing.T) {
	release := without(kustomized(t, "config/default", chartDefaultImage), "Namespace//nodepool-system")
	pack := kustomized(t, ObservabilityComponent, "")
	want := map[string]*unstructured.Unstructured{}
	for _, m := range []map[string]*unstructured.Unstructured{release, pack} {
		for k, o := range m {
			want[k] = o
		}
	}
	sameObjects(t, "monitoring", render(t, ChartNamespace, "monitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}"), want)

	for _, tc := range []struct {
		value string
		kinds []string
	}{
		{"serviceMonitor", []string{"ServiceMonitor/nodepool-system/nodepool-controller", "ServiceMonitor/nodepool-system/nodepool-payload-server"}},
		{"prometheusRule", []string{"PrometheusRule/nodepool-system/nodepool"}},
		{"dashboard", []string{"ConfigMap/nodepool-system/nodepool-grafana-dashboard"}},
	} {
		got := render(t, ChartNamespace, "monitoring: {"+tc.value+": {enabled: true, labels: {release: kube-prometheus-stack}}}")
		added := keys(without(got, keys(release)...))
		if !slices.Equal(added, sortedClone(tc.kinds)) {
			t.Errorf("monitoring.%s.enabled adds %v, want %v", tc.value, added, tc.kinds)
		}
		for _, k := range tc.kinds {
			if o := got[k]; o != nil && o.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Errorf("monitoring.%s.labels: %s has labels %v", tc.value, k, o.GetLabels())
			}
		}
	}
}
