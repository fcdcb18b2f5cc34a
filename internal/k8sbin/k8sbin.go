// Package k8sbin finds the kube-apiserver and etcd binaries that nodepool
// builds from the Go module proxy into bin/k8s/<versions>/ (with
// hack/tools/build-control-plane.sh), building them when they are missing.
// Tests and the dev environment (`nodepool dev up`) run them.
package k8sbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Env names the variable holding the folder with kube-apiserver and etcd.
// `make test` sets it; without it Dir runs the build script, which returns
// at once when the binaries exist.
const Env = "NODEPOOL_ASSETS"

// buildScript builds the binaries and prints their folder.
const buildScript = "hack/tools/build-control-plane.sh"

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
			return "", fmt.Errorf("no go.mod of module nodepool.dev/nodepool above the working directory: run from a nodepool checkout")
		}
		dir = parent
	}
}

// Dir returns the folder holding kube-apiserver and etcd: $NODEPOOL_ASSETS
// if set, else the folder the build script prints after building them if
// they are missing (about 15 minutes on 2 cores, once). The script's
// progress goes to progress (nil discards it).
func Dir(progress *os.File) (string, error) {
	if dir := os.Getenv(Env); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("finding kube-apiserver and etcd: set %s (or pass --assets-dir) to a folder holding both, or run from a nodepool checkout, which builds them: %w", Env, err)
	}
	cmd := exec.Command("bash", filepath.Join(root, buildScript))
	if progress != nil {
		cmd.Stderr = progress
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building kube-apiserver and etcd with %s (needs Go and the module proxy; or set %s to a folder holding both): %w", buildScript, Env, err)
	}
	return strings.TrimSpace(string(out)), nil
}
