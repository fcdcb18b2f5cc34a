package sim

import (
	"flag"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete

// NewCommand returns the `nodepool sim-provider` command.
func NewCommand() *cobra.Command {
	var (
		opts                               Options
		kubeconfig, workloadKubeconfig     string
		metricsAddress, probeAddress       string
		namespace, leaderElectionNamespace string
		leaderElect                        bool
		zapOpts                            = zap.Options{}
	)
	cmd := &cobra.Command{
		Use:   "sim-provider",
		Short: "Run the simulated Cluster API infrastructure provider (SimMachine, SimControlPlane)",
		Long: `Run the simulated Cluster API infrastructure provider.

A SimMachine boots the way a real machine does: it waits for its Machine's
bootstrap data Secret, reads the Ignition pointer config in it, fetches the
payload over HTTPS with the token and CA the pointer carries (retrying 5xx
answers, such as the payload server's 511 for an unknown token, with
Ignition's backoff), validates it, and registers a Node with the labels the
payload's kubelet drop-in sets, annotated with the payload hash. Deleting the
SimMachine deletes its Node. Conditions (Booted, Ready, NodeHealthy) and
Events say where a machine stopped.

Each booted SimMachine also runs a node agent for in-place updates: when
the NodePool controller writes update.nodepool.dev/desired-payload and
update.nodepool.dev/secret on its Node, the agent reports
update.nodepool.dev/state=Working, waits the machine's update delay, fetches
the payload with the pointer config of that Secret (in the workload
cluster), checks it is the desired one, swaps the old payload's Node labels
for the new one's and reports update.nodepool.dev/current-payload and
state=Done, or state=Degraded with update.nodepool.dev/message saying why
(retrying until the cause is gone).

A SimControlPlane is a hosted control plane that is already up: it writes
the <cluster>-kubeconfig Secret, pointing at --workload-kubeconfig (default:
the API server this command talks to), and reports itself initialised.

Knobs, per machine (SimMachine or SimMachineTemplate spec fields, or
annotations on the SimMachine or its Machine):
  spec.bootDelay   / sim.nodepool.dev/boot-delay=10s    power-on time before the fetch
  spec.failBoot    / sim.nodepool.dev/fail-boot=true    never boots
  spec.unhealthy   / sim.nodepool.dev/unhealthy=true    its Node turns NotReady
  spec.updateDelay / sim.nodepool.dev/update-delay=5s   time an in-place update takes
  spec.failUpdate  / sim.nodepool.dev/fail-update=why   in-place updates stay Degraded,
                                                        saying why ("false" or removing
                                                        it lets them go on)

The CRDs are in config/sim/crd/bases and the RBAC role in config/sim/rbac.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			ctrl.SetLogger(log)
			klog.SetLogger(log)
			cfg, err := restConfig(kubeconfig, "--kubeconfig")
			if err != nil {
				return err
			}
			if workloadKubeconfig != "" {
				if opts.WorkloadConfig, err = restConfig(workloadKubeconfig, "--workload-kubeconfig"); err != nil {
					return err
				}
			}
			scheme := runtime.NewScheme()
			if err := AddToScheme(scheme); err != nil {
				return err
			}
			cacheOpts := CacheOptions()
			if namespace != "" {
				cacheOpts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                  scheme,
				Cache:                   cacheOpts,
				Metrics:                 metricsserver.Options{BindAddress: metricsAddress},
				HealthProbeBindAddress:  probeAddress,
				LeaderElection:          leaderElect,
				LeaderElectionID:        "sim-provider.nodepool.dev",
				LeaderElectionNamespace: leaderElectionNamespace,
			})
			if err != nil {
				return fmt.Errorf("creating the manager: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := SetupWithManager(ctx, mgr, opts); err != nil {
				return err
			}
			if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			log.Info("starting the sim provider", "namespace", namespace, "bootDelay", opts.BootDelay.String(), "updateDelay", opts.UpdateDelay.String())
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the management cluster (default: $KUBECONFIG, in-cluster, then ~/.kube/config)")
	f.StringVar(&workloadKubeconfig, "workload-kubeconfig", "", "kubeconfig that SimControlPlanes write into <cluster>-kubeconfig Secrets (default: the management cluster's; a bearer token file is inlined)")
	f.StringVar(&opts.ClusterViewsAddress, "cluster-views-bind-address", "", `address where each Cluster's <cluster>-kubeconfig Secret reaches its own view of the workload API server, its own Nodes only (HTTPS, the sim's own CA; every client of the Secrets must reach it, as 127.0.0.1 if it names no host; "" : the Secrets point at the workload API server itself, and every Cluster sees every Node)`)
	f.StringVar(&namespace, "namespace", "", "reconcile the machines of this namespace only (default: every namespace)")
	f.DurationVar(&opts.BootDelay, "boot-delay", 0, "power-on time of a machine that sets none, before it fetches its payload")
	f.DurationVar(&opts.UpdateDelay, "update-delay", 0, "time the node agent of a machine that sets none takes to apply an in-place update, from reporting Working")
	f.DurationVar(&opts.FetchTimeout, "fetch-timeout", DefaultFetchTimeout, "time limit of one payload request")
	f.DurationVar(&opts.InitialRetryDelay, "initial-retry-delay", DefaultInitialRetryDelay, "first delay before a failed payload fetch is retried (doubles each time)")
	f.DurationVar(&opts.MaxRetryDelay, "max-retry-delay", DefaultMaxRetryDelay, "longest delay between payload fetch retries")
	f.IntVar(&opts.Concurrency, "concurrency", DefaultConcurrency, "machines booted at once")
	f.StringVar(&metricsAddress, "metrics-bind-address", ":8090", `address of the Prometheus /metrics endpoint ("0" disables it)`)
	f.StringVar(&probeAddress, "health-probe-bind-address", ":8091", `address of /healthz and /readyz ("0" disables it)`)
	f.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, for running more than one replica")
	f.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	return cmd
}

func restConfig(kubeconfig, flagName string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := config.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("finding the API server: %w (set %s)", err, flagName)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", flagName, kubeconfig, err)
	}
	return cfg, nil
}
