package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// AssetsEnv names the variable holding the folder with kube-apiserver and
// etcd. `make test` sets it; without it the harness runs the build script,
// which returns at once when the binaries exist.
const AssetsEnv = "NODEPOOL_ASSETS"

// RepoRoot returns the root of the nodepool checkout, found by walking up
// from the working directory to the go.mod of module nodepool.dev/nodepool.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module nodepool.dev/nodepool\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module nodepool.dev/nodepool above the working directory")
		}
		dir = parent
	}
}

// AssetsDir returns the folder holding kube-apiserver and etcd, building
// them first if they are missing.
func AssetsDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack/tools/build-control-plane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the test control plane with hack/tools/build-control-plane.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
