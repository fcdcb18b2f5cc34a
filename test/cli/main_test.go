// Package cli_test runs every `kubectl nodepool` command against the real
// stack (test/stack): a real API server, the Cluster API controllers, the
// payload server, the sim provider and the NodePool controller. Tables are
// compared with golden files in testdata/ after ages, hashes and namespace
// names are normalised; `go test ./test/cli -update` rewrites them.
package cli_test

import (
	"flag"
	"testing"

	"nodepool.dev/nodepool/test/stack"
)

var (
	st *stack.Stack
	// kubeconfig reaches the stack as an administrator, context namespace
	// "default".
	kubeconfig string

	updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")
)

func TestMain(m *testing.M) {
	flag.Parse()
	stack.Main(m, func(s *stack.Stack) error {
		st = s
		var err error
		kubeconfig, err = st.WriteKubeconfig("kubeconfig", "default")
		return err
	}, nil)
}
