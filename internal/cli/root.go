package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"nodepool.dev/nodepool/internal/settings"
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

// ExitError carries the exit code of a failed command (the Exit
// constants).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit codes of `kubectl nodepool`. 1 to 4 are what a command found out
// (a rollout's or a plan's outcome); 5 is that it could not ask: the
// cluster cannot be reached, the request is not allowed, or what it names
// is not there.
const (
	// ExitFailure: the rollout cannot proceed (failed, halted, cancelled),
	// a planned pool is refused or invalid, or any other error (a bad
	// flag or input file).
	ExitFailure = 1
	// ExitStalled: a rollout stalled, is paused indefinitely or waits
	// for its maintenance window.
	ExitStalled = 2
	// ExitTimeout: --timeout passed before the rollout completed.
	ExitTimeout = 3
	// ExitUnreachable: the API server cannot be reached (or the
	// kubeconfig names none), refuses the credentials or the request
	// (401, 403), or the object named is not found (a pool, a FleetRollout,
	// the controller's settings, an API nodepool's CRDs serve).
	ExitUnreachable = 5
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
	return exitCode(err)
}

// exitCode is the code err exits with: an ExitError's, ExitUnreachable
// for the API server's 401, 403 and 404 and for a server that does not
// answer, else ExitFailure.
func exitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if unreachable(err) {
		return ExitUnreachable
	}
	return ExitFailure
}

// unreachable reports whether err says the cluster could not be asked:
// not reached, not allowed, or the object (or its API) not found.
func unreachable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Reason {
		case metav1.StatusReasonUnauthorized, metav1.StatusReasonForbidden, metav1.StatusReasonNotFound, metav1.StatusReasonServiceUnavailable:
			return true
		}
		return false
	}
	if meta.IsNoMatchError(err) || discovery.IsGroupDiscoveryFailedError(err) {
		return true
	}
	// client-go wraps a failed connection (refused, DNS, TLS, timeout) in
	// a *url.Error.
	var uerr *url.Error
	var nerr net.Error
	return errors.As(err, &uerr) || errors.As(err, &nerr)
}

// unreachableError marks err as ExitUnreachable.
func unreachableError(err error) error { return &ExitError{Code: ExitUnreachable, Err: err} }

// NewCommand returns `kubectl nodepool` with its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{IOStreams: streams, ConfigFlags: genericclioptions.NewConfigFlags(true)}
	cmd := &cobra.Command{
		Use:   "kubectl-nodepool",
		Short: "Inspect and control the rollouts of NodePools",
		Long: `kubectl nodepool inspects and controls the rollouts of NodePools: pools of
worker machines on Cluster API whose nodes are replaced only when their owner
asks (docs/rollouts.md explains every way a rollout starts or does not).

Install it as a kubectl plugin by putting the binary kubectl-nodepool on your
PATH; kubectl_complete-nodepool beside it lets kubectl (1.26 or later) complete
pool, FleetRollout and revision names from the cluster.

-o takes kubectl's printers (json, yaml, name, jsonpath=...) and wide besides
the default table.`,
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
	flags.StringVarP(&o.Output, "output", "o", outputTable, "output format: table, wide (every column), json, yaml, name (kind.group/name of the objects shown), jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE or jsonpath-file=FILE (kubectl's printers; a jsonpath runs on what -o json prints)")
	flags.StringVar(&o.ControllerNamespace, "controller-namespace", settings.DefaultNamespace, "namespace where the controller publishes its settings (ConfigMap "+settings.ConfigMapName+"), which plan, diff and rollout status decide with")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error { return o.checkOutput() }

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
	cmd.AddCommand(rollout, newDiffCommand(o), newPlanCommand(o), fleet, newVersionCommand(o))
	documentExitCodes(cmd)
	if err := o.registerCompletions(cmd); err != nil {
		panic(err) // a command or flag named in completion.go does not exist: a programming error the tests catch
	}
	return cmd
}

// out is where results go.
func (o *Options) out() io.Writer { return o.Out }
