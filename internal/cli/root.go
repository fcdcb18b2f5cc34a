package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/settings"
	"nodepool.dev/nodepool/internal/version"
)

// Options are the flags and streams every command shares.
type Options struct {
	genericiooptions.IOStreams
	// ConfigFlags are kubectl's: --kubeconfig, --context, -n and the rest.
	ConfigFlags *genericclioptions.ConfigFlags
	// AllNamespaces is -A.
	AllNamespaces bool
	// Output is -o: table, json or yaml.
	Output string
	// ControllerNamespace is where the controller publishes its settings
	// (the ConfigMap nodepool-controller-settings).
	ControllerNamespace string
	// Now is the clock; nil means time.Now. Tests do not move it: the
	// controller runs on the real clock too.
	Now func() time.Time

	// client is made once from ConfigFlags.
	client client.Client
	// published are the controller's settings, read once.
	published *controller
	// missing are the reads of a prediction the user may not make, by
	// namespace (access.go).
	missing map[string][]permission
}

func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// ExitError carries the exit code of a failed command: 1 for a failure, 2
// for a stalled or indefinitely paused rollout, 3 for a timeout.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit codes of `kubectl nodepool`.
const (
	ExitFailure = 1
	ExitStalled = 2
	ExitTimeout = 3
)

// Main runs the plugin with the process's arguments and exits.
func Main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(Run(context.Background(), streams, os.Args[1:]))
}

// Run runs the plugin with args and returns the exit code, printing the
// error, if any, on streams.ErrOut.
func Run(ctx context.Context, streams genericiooptions.IOStreams, args []string) int {
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(streams.ErrOut, "error:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

// NewCommand returns `kubectl nodepool` with its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, ConfigFlags: genericclioptions.NewConfigFlags(true)}
	cmd := &cobra.Command{
		Use:   "kubectl-nodepool",
		Short: "Inspect and control the rollouts of NodePools",
		Long: `kubectl nodepool inspects and controls the rollouts of NodePools: pools of
worker machines on Cluster API whose nodes are replaced only when their owner
asks (docs/rollouts.md explains every way a rollout starts or does not).

Install it as a kubectl plugin by putting the binary on your PATH under the name
kubectl-nodepool (the nodepool binary behaves the same under that name).`,
		Example: `  # Will my edit replace nodes? Predict it with the controller's own engine.
  kubectl nodepool plan -f workers.yaml -f chrony-configmap.yaml

  # Follow a rollout until it completes.
  kubectl nodepool rollout status workers -n team-a

  # Which pools of the fleet carry platform changes their nodes do not run yet?
  kubectl nodepool fleet -A --sort-by drift-age`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodepool"},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	flags := cmd.PersistentFlags()
	o.ConfigFlags.AddFlags(flags)
	flags.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "list pools of every namespace (fleet, plan)")
	flags.StringVarP(&o.Output, "output", "o", "table", "output format: table, json or yaml")
	flags.StringVar(&o.ControllerNamespace, "controller-namespace", settings.DefaultNamespace, "namespace where the controller publishes its settings (ConfigMap "+settings.ConfigMapName+"), which plan, diff and rollout status decide with")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		switch o.Output {
		case "table", "json", "yaml":
			return nil
		}
		return fmt.Errorf("--output %q is not supported: use table, json or yaml", o.Output)
	}

	rollout := &cobra.Command{
		Use:   "rollout",
		Short: "Follow, list, undo, force, pause and resume the rollouts of a pool",
		Long: `Commands about the rollouts of one NodePool: its progress (status), its record
(history), going back (undo), forcing one (restart, apply-pending) and holding
them (pause, resume).`,
		Example: `  kubectl nodepool rollout status workers
  kubectl nodepool rollout history workers
  kubectl nodepool rollout undo workers --to-revision 2`,
	}
	rollout.AddCommand(
		newStatusCommand(o),
		newHistoryCommand(o),
		newUndoCommand(o),
		newRestartCommand(o),
		newPauseCommand(o),
		newResumeCommand(o),
		newApplyPendingCommand(o),
	)
	fleet := newFleetCommand(o)
	fleet.AddCommand(newFleetRolloutCommand(o), newFleetForecastCommand(o))
	cmd.AddCommand(rollout, newDiffCommand(o), newPlanCommand(o), fleet, version.NewCommand())
	return cmd
}

// out is where results go.
func (o *Options) out() io.Writer { return o.Out }
