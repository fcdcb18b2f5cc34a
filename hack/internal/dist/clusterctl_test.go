package dist

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"nodepool.dev/nodepool/internal/k8sbin"
)

// vars is clusterctl's variable lookup over values: a missing one is an
// error, as with clusterctl's own config client.
func vars(values map[string]string) func(string) (string, error) {
	return func(name string) (string, error) {
		if v, ok := values[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s is not set", name)
	}
}

// Processed with no variable set, the add-on components are the
// cert-manager manifest of the release, byte for byte; their variables are
// the image, the namespace and Cluster API's user.
func TestClusterctlComponentsDefaultToTheCertManagerManifest(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ClusterctlComponents(root, testPinned)
	if err != nil {
		t.Fatal(err)
	}
	p := yamlprocessor.NewSimpleProcessor()
	names, err := p.GetVariables(raw)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if want := []string{VarClusterAPIUser, VarImage, VarNamespace}; !slices.Equal(names, want) {
		t.Errorf("variables %v, want %v", names, want)
	}
	got, err := p.Process(raw, vars(nil))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := build(t, ClusterctlComponentsDir, testPinned)
	if !bytes.Equal(got, want) {
		t.Errorf("processed with defaults, the components are not kustomize build %s:\n%s", ClusterctlComponentsDir, got)
	}
}

// NODEPOOL_NAMESPACE reaches every mention of the namespace, which
// clusterctl's --target-namespace would not (the controller's args, the
// certificates' names, the policies' usernames); the image and Cluster
// API's user follow their variables.
func TestClusterctlVariablesReachEveryMention(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ClusterctlComponents(root, testPinned)
	if err != nil {
		t.Fatal(err)
	}
	got, err := yamlprocessor.NewSimpleProcessor().Process(raw, vars(map[string]string{
		VarNamespace: "platform", VarImage: "mirror.example/nodepool:v9", VarClusterAPIUser: "system:serviceaccount:capi:capi-controller",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{defaultNamespace, testPinned, defaultClusterAPIUser} {
		if bytes.Contains(got, []byte(old)) {
			t.Errorf("%s is still named", old)
		}
	}
	for _, s := range []string{
		"--payload-server-url=https://nodepool-payload-server.platform.svc:",
		"--leader-election-namespace=platform",
		"--settings-namespace=platform",
		"--management-config=platform/management-config",
		`"system:serviceaccount:platform:nodepool-controller"`,
		`"system:serviceaccount:capi:capi-controller"`,
		"- nodepool-payload-server.platform.svc",
		"image: mirror.example/nodepool:v9",
		"namespace: platform",
	} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("the components hold no %q", s)
		}
	}
}

// metadata.yaml maps the series of a release to the contract of the pinned
// Cluster API, and a release of a series it lacks is refused.
func TestClusterctlMetadataIsThePinnedContract(t *testing.T) {
	root, err := k8sbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ClusterctlMetadata(root, "v0.1.3"); err != nil {
		t.Fatal(err)
	}
	if _, err := ClusterctlMetadata(root, "v7.3.0"); err == nil {
		t.Error("a release of series 7.3, which metadata.yaml lacks, was accepted")
	}
	b, err := ClusterctlMetadata(root, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range bytes.Split(b, []byte("- major:"))[1:] {
		if !bytes.Contains(series, []byte("contract: "+clusterv1.GroupVersion.Version+"\n")) {
			t.Errorf("series %s: not Cluster API's contract %s", series, clusterv1.GroupVersion.Version)
		}
	}
}
