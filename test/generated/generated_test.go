// Package generated checks that the committed generated files (deepcopy code,
// CRDs and RBAC of nodepool and the sim provider, the copies of the Cluster
// API CRDs) are what `make generate` makes from the current sources.
package generated

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"nodepool.dev/nodepool/test/harness"
)

func controllerGen(t *testing.T, root string) string {
	t.Helper()
	if bin := os.Getenv("CONTROLLER_GEN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "controller-gen")
	cmd := exec.Command("go", "build", "-o", bin, "sigs.k8s.io/controller-tools/cmd/controller-gen")
	cmd.Dir = filepath.Join(root, "hack/tools/controller-gen")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building controller-gen: %v\n%s", err, out)
	}
	return bin
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gen := controllerGen(t, root)

	// CRDs and RBAC: generate into a temporary folder and compare file by
	// file, with the arguments of `make generate`.
	for _, g := range []struct {
		args      []string
		committed string
	}{
		{[]string{"crd", "paths=./api/..."}, "config/crd/bases"},
		{[]string{"crd", "paths=./internal/sim/api/..."}, "config/sim/crd/bases"},
		{[]string{"rbac:roleName=nodepool-sim-provider", "paths=./internal/sim/..."}, "config/sim/rbac"},
	} {
		out := t.TempDir()
		kind := "crd"
		if g.args[0] != "crd" {
			kind = "rbac"
		}
		run(t, root, gen, append(g.args, "output:"+kind+":artifacts:config="+out)...)
		compareDirs(t, out, filepath.Join(root, g.committed), "*.yaml")
	}
	// The controller's ClusterRole sits beside hand-written RBAC files.
	rbacOut := t.TempDir()
	run(t, root, gen, "rbac:roleName=nodepool-controller", "paths=./internal/controller/...", "output:rbac:artifacts:config="+rbacOut)
	compareDirs(t, rbacOut, filepath.Join(root, "config/rbac"), "role.yaml")

	// Deepcopy: controller-gen writes next to the types, so generate in a
	// copy of the API folders.
	work := t.TempDir()
	copyTree(t, root, work, "go.mod", "go.sum", "hack/boilerplate.go.txt")
	for _, api := range []string{"api/v1alpha1", "internal/sim/api/v1alpha1"} {
		copyDir(t, filepath.Join(root, api), filepath.Join(work, api))
	}
	run(t, work, gen, "object:headerFile=hack/boilerplate.go.txt", "paths=./api/...")
	run(t, work, gen, "object:headerFile=hack/boilerplate.go.txt", "paths=./internal/sim/api/...")
	for _, api := range []string{"api/v1alpha1", "internal/sim/api/v1alpha1"} {
		compareDirs(t, filepath.Join(work, api), filepath.Join(root, api), "zz_generated.*.go")
	}
}

func TestCAPICRDCopiesAreCurrent(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locating sigs.k8s.io/cluster-api: %v", err)
	}
	compareDirs(t, filepath.Join(string(bytes.TrimSpace(out)), "core/config/crd/bases"), filepath.Join(root, "internal/capi/crds"), "*.yaml")
}

func run(t *testing.T, dir, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
}

// compareDirs fails for every file matching pattern that differs, is
// missing or is extra in committed.
func compareDirs(t *testing.T, fresh, committed, pattern string) {
	t.Helper()
	want, _ := filepath.Glob(filepath.Join(fresh, pattern))
	got, _ := filepath.Glob(filepath.Join(committed, pattern))
	if len(want) == 0 {
		t.Fatalf("nothing generated matching %s in %s", pattern, fresh)
	}
	seen := map[string]bool{}
	for _, w := range want {
		name := filepath.Base(w)
		seen[name] = true
		a, _ := os.ReadFile(w)
		b, err := os.ReadFile(filepath.Join(committed, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is stale: run `make generate` and commit the result", filepath.Join(committed, name))
		}
	}
	for _, g := range got {
		if !seen[filepath.Base(g)] {
			t.Errorf("%s is not generated any more: run `make generate` and delete it", g)
		}
	}
}

func copyTree(t *testing.T, from, to string, files ...string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(to, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		copyTree(t, from, to, n)
	}
}
