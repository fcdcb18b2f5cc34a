// Package move tests clusterctl move of NodePools between two real
// management clusters: two whole stacks (control plane, Cluster API,
// payload server, NodePool controller, sim provider), made to look
// installed to clusterctl as clusterctl init leaves them, and clusterctl's
// own move library (sigs.k8s.io/cluster-api/cmd/clusterctl/client, the
// version go.mod pins). The workload clusters (where the Nodes are) stay
// where they are, on the source's API server, as a move leaves them.
package move

import (
	"context"
	"fmt"
	"os"
	"testing"

	"nodepool.dev/nodepool/test/stack"
)

var (
	// src and dst are the management clusters moved from and to.
	src, dst *stack.Stack
	// srcKubeconfig and dstKubeconfig reach them.
	srcKubeconfig, dstKubeconfig string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	// clusterctl reads its configuration from the home folder: give it
	// an empty one of its own.
	home, err := os.MkdirTemp("", "nodepool-move-home-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", home)

	if src, err = stack.Start(ctx); err != nil {
		return 0, fmt.Errorf("starting the source management cluster: %w", err)
	}
	defer stop("source", src)
	if dst, err = stack.StartTarget(ctx, src.Env.Config); err != nil {
		return 0, fmt.Errorf("starting the target management cluster: %w", err)
	}
	defer stop("target", dst)
	if srcKubeconfig, err = src.WriteKubeconfig("source.kubeconfig", ""); err != nil {
		return 0, err
	}
	if dstKubeconfig, err = dst.WriteKubeconfig("target.kubeconfig", ""); err != nil {
		return 0, err
	}
	for _, s := range []struct {
		st         *stack.Stack
		kubeconfig string
	}{{src, srcKubeconfig}, {dst, dstKubeconfig}} {
		if err := s.st.InstallClusterctlInventory(ctx, s.kubeconfig); err != nil {
			return 0, err
		}
	}
	return m.Run(), nil
}

func stop(what string, s *stack.Stack) {
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the %s stack: %v\n", what, err)
	}
}
