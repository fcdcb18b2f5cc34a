package dist

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"nodepool.dev/nodepool/internal/k8sbin"
)

const testPinned = "registry.example/nodepool@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// What config/default installs; config/cert-manager adds its certificates.
var defaultObjects = []string{
	"Namespace//nodepool-system",
	"CustomResourceDefinition//nodepools.nodepool.dev",
	"CustomResourceDefinition//fleetrollouts.nodepool.dev",
	"ServiceAccount/nodepool-system/nodepool-controller",
	"ServiceAccount/nodepool-system/nodepool-payload-server",
	"ClusterRole//nodepool-controller",
	"ClusterRole//nodepool-edit",
	"ClusterRole//nodepool-view",
	"ClusterRoleBinding//nodepool-controller",
	// The payload server reads Secrets in its own namespace only: the
	// controller's mirrors.
	"Role/nodepool-system/nodepool-payload-server",
	"RoleBinding/nodepool-system/nodepool-payload-server",
	// Leader election and the published settings, in its own namespace.
	"Role/nodepool-system/nodepool-controller",
	"RoleBinding/nodepool-system/nodepool-controller",
	"ValidatingAdmissionPolicy//nodepool-controller-writes",
	"ValidatingAdmissionPolicyBinding//nodepool-controller-writes",
	// A pool's MachineDeployment and MachineSets are the controller's.
	"ValidatingAdmissionPolicy//nodepool-owns-machinedeployments",
	"ValidatingAdmissionPolicyBinding//nodepool-owns-machinedeployments",
	"ValidatingAdmissionPolicy//nodepool-owns-machinesets",
	"ValidatingAdmissionPolicyBinding//nodepool-owns-machinesets",
	"ValidatingAdmissionPolicy//nodepool-owns-machinesets-deletion",
	"ValidatingAdmissionPolicyBinding//nodepool-owns-machinesets-deletion",
	"ValidatingAdmissionPolicy//nodepool-payload-server-writes",
	"ValidatingAdmissionPolicyBinding//nodepool-payload-server-writes",
	"Deployment/nodepool-system/nodepool-controller",
	"Deployment/nodepool-system/nodepool-payload-server",
	"Service/nodepool-system/nodepool-controller-metrics",
	"Service/nodepool-system/nodepool-payload-server",
	"Service/nodepool-system/nodepool-payload-server-metrics",
	"PodDisruptionBudget/nodepool-system/nodepool-controller",
	"PodDisruptionBudget/nodepool-system/nodepool-payload-server",
}

var certManagerObjects = []string{
	"Issuer/nodepool-system/nodepool-selfsigned",
	"Issuer/nodepool-system/nodepool-payload-server-ca",
	"Certificate/nodepool-system/nodepool-payload-server-ca",
	"Certificate/nodepool-system/nodepool-payload-server",
}

func build(t *testing.T, dir, image string) ([]byte, map[string]*unstructured.Unstructured) {
	t.Helper()
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Kustomize(root, dir, image)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		objs[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u
	}
	return b, objs
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestReleaseManifests(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"config/default", defaultObjects},
		{"config/cert-manager", append(slices.Clone(defaultObjects), certManagerObjects...)},
	} {
		t.Run(strings.TrimPrefix(tc.dir, "config/"), func(t *testing.T) {
			b, objs := build(t, tc.dir, testPinned)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if got := keys(objs); !slices.Equal(got, want) {
				t.Errorf("kustomize build %s makes\n  %s\nwant\n  %s", tc.dir, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			if err := CheckPinned(b, testPinned); err != nil {
				t.Error(err)
			}
			if strings.Contains(string(b), "nodepool:latest") {
				t.Error("nodepool:latest is left in the release")
			}
			// The first objects are what the others need.
			if first, _ := Decode(b); len(first) < 2 || first[0].Kind != "Namespace" || first[1].Kind != "CustomResourceDefinition" {
				t.Errorf("the manifests do not start with the Namespace and the CRD")
			}
		})
	}
}

// The certificate cert-manager issues is the Secret both Deployments mount,
// for the name the controller gives machines.
func TestCertManagerIssuesTheMountedSecret(t *testing.T) {
	_, objs := build(t, "config/cert-manager", "")
	cert := objs["Certificate/nodepool-system/nodepool-payload-server"]
	if cert == nil {
		t.Fatal("no Certificate nodepool-payload-server")
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	for _, d := range []string{"nodepool-controller", "nodepool-payload-server"} {
		dep := objs["Deployment/nodepool-system/"+d]
		if dep == nil {
			t.Fatalf("no Deployment %s", d)
		}
		vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
		mounted := false
		for _, v := range vols {
			if name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); name == secret {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("Deployment %s mounts no Secret %s, which the Certificate fills", d, secret)
		}
	}
	dep := objs["Deployment/nodepool-system/nodepool-controller"]
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--payload-server-url="); ok {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(dnsNames, u.Hostname()) {
				t.Errorf("the controller gives machines %s, not among the certificate's names %v", u.Hostname(), dnsNames)
			}
			return
		}
	}
	t.Errorf("the controller has no --payload-server-url: %v", args)
}

func TestImageEntry(t *testing.T) {
	for in, want := range map[string]string{
		"r.example/a/nodepool@sha256:abc": `{name: nodepool, newName: "r.example/a/nodepool", digest: "sha256:abc"}`,
		"r.example:5000/nodepool:v1":      `{name: nodepool, newName: "r.example:5000/nodepool", newTag: "v1"}`,
		"r.example:5000/nodepool":         `{name: nodepool, newName: "r.example:5000/nodepool", newTag: "latest"}`,
	} {
		if got := imageEntry(in); got != want {
			t.Errorf("imageEntry(%q) = %s, want %s", in, got, want)
		}
	}
}
