package harness

import (
	"os"

	"nodepool.dev/nodepool/internal/k8sbin"
)

// AssetsEnv names the variable holding the folder with kube-apiserver and
// etcd. `make test` sets it; without it the harness runs the build script,
// which returns at once when the binaries exist.
const AssetsEnv = k8sbin.Env

// RepoRoot returns the root of the nodepool checkout, found by walking up
// from the working directory to the go.mod of module nodepool.dev/nodepool.
func RepoRoot() (string, error) { return k8sbin.RepoRoot() }

// AssetsDir returns the folder holding kube-apiserver and etcd, building
// them first if they are missing.
func AssetsDir() (string, error) { return k8sbin.Dir(os.Stderr) }
