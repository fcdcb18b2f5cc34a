// Package cli_test runs every `kubectl nodepool` command against the real
// stack (test/stack): a real API server, the Cluster API controllers, the
// payload server, the sim provider and the NodePool controller. Tables are
// compared with golden files in testdata/ after ages, hashes and namespace
// names are normalised; `go test ./test/cli -update` rewrites them.
package cli_test

import (
	"context"
	"flag"
	"fmt"
	"os"
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
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if st, err = stack.Start(context.Background()); err != nil {
		return 0, err
	}
	defer func() {
		if err := st.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the stack:", err)
		}
	}()
	if kubeconfig, err = st.WriteKubeconfig("kubeconfig", "default"); err != nil {
		return 0, err
	}
	return m.Run(), nil
}
