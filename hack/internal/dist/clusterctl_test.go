package dist

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	clusterctlcmd "sigs.k8s.io/cluster-api/cmd/clusterctl/cmd"

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
// the namespace and Cluster API's user.
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
	if want := []string{VarClusterAPIUser, VarNamespace}; !slices.Equal(names, want) {
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
// certificates' names, the policies' usernames); Cluster API's user
// follows its variable.
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
		VarNamespace: "platform", VarClusterAPIUser: "system:serviceaccount:capi:capi-controller",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{defaultNamespace, defaultClusterAPIUser} {
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
		"image: " + testPinned,
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

// runClusterctl is the environment variable that makes the test binary
// clusterctl itself (TestMain): its arguments are the rest of the command
// line, after --.
const runClusterctl = "NODEPOOL_DIST_TEST_RUN_CLUSTERCTL"

func TestMain(m *testing.M) {
	if os.Getenv(runClusterctl) == "1" {
		i := slices.Index(os.Args, "--")
		os.Args = append([]string{"clusterctl"}, os.Args[i+1:]...)
		clusterctlcmd.Execute() // exits 1 on an error
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// clusterctlRepository writes the provider repository a release makes
// (addon-nodepool/v0.1.0: addon-components.yaml and metadata.yaml, the
// image testPinned) and a clusterctl.yaml naming it with more, and returns
// the configuration file.
func clusterctlRepository(t *testing.T, more string) string {
	t.Helper()
	root := testRoot(t)
	dir := t.TempDir()
	comps, err := ClusterctlComponents(root, testPinned)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := ClusterctlMetadata(root, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	version := filepath.Join(dir, "addon-nodepool", "v0.1.0")
	if err := os.MkdirAll(version, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{ClusterctlComponentsFile: comps, ClusterctlMetadataFile: meta} {
		if err := os.WriteFile(filepath.Join(version, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "clusterctl.yaml")
	conf := fmt.Sprintf("providers:\n  - name: nodepool\n    type: AddonProvider\n    url: file://%s\nCLUSTERCTL_DISABLE_VERSIONCHECK: \"true\"\n%s",
		filepath.Join(version, ClusterctlComponentsFile), more)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// clusterctl runs clusterctl (the pinned module's command, in a process of
// its own) with args and returns its standard output.
func clusterctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), runClusterctl+"=1", "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("clusterctl %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), err
}

// `clusterctl generate provider --addon nodepool --describe`, which
// operations.md gives for the variables, reads the components without
// processing them: their image must be one as it stands. It lists the
// variables and the image.
func TestClusterctlDescribesTheProvider(t *testing.T) {
	cfg := clusterctlRepository(t, "")
	out, err := clusterctl(t, "generate", "provider", "--addon", "nodepool", "--describe", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Name:               nodepool\n",
		"Version:            v0.1.0\n",
		"  - " + VarNamespace + "\n",
		"  - " + VarClusterAPIUser + "\n",
		"Images:\n  - " + testPinned + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("clusterctl generate provider --describe says no %q:\n%s", want, out)
		}
	}
}

// The image is changed as clusterctl changes any provider's: its images:
// setting (clusterctl.yaml) moves it to a mirror, keeping the digest.
func TestClusterctlImagesSettingMovesTheImage(t *testing.T) {
	cfg := clusterctlRepository(t, "images:\n  addon-nodepool:\n    repository: mirror.example/platform\n")
	out, err := clusterctl(t, "generate", "provider", "--addon", "nodepool", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, digest, _ := strings.Cut(testPinned, "@")
	want := "image: mirror.example/platform/nodepool@" + digest
	if n := strings.Count(out, want); n != 2 {
		t.Errorf("clusterctl generate provider runs %q in %d Deployments, want 2:\n%s", want, n, out)
	}
	if strings.Contains(out, testPinned) {
		t.Errorf("the release's image is still named:\n%s", out)
	}
}
