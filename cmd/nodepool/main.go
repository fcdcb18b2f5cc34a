// Command nodepool is the one binary of nodepool's server side: each part
// of the system is a subcommand, wired here from the package that owns it.
// The kubectl plugin is its own, smaller binary: cmd/kubectl-nodepool.
package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"nodepool.dev/nodepool/internal/controller"
	"nodepool.dev/nodepool/internal/devenv"
	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/sim"
	"nodepool.dev/nodepool/internal/version"
)

func main() {
	// nodepool_build_info on the controller's /metrics (the payload server
	// registers it on its own registry).
	ctrlmetrics.Registry.MustRegister(version.NewCollector())
	if err := newRootCommand().ExecuteContext(context.Background()); err != nil {
		os.Exit(1)
	}
}

// newRootCommand returns `nodepool` with its subcommands.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "nodepool",
		Short:         "Pools of worker machines on Cluster API with predictable rollouts",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(
		controller.NewCommand(),
		payloadserver.NewCommand(),
		sim.NewCommand(),
		devenv.NewCommand(),
		version.NewCommand(),
	)
	return root
}
