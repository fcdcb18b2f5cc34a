package controller

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"nodepool.dev/nodepool/internal/inputs"
	"nodepool.dev/nodepool/internal/settings"
)

// Version is the nodepool build, set with -ldflags "-X ...controller.Version=v0.1.0".
// It is the renderer version of every payload (a management component:
// upgrading nodepool never rolls nodes).
var Version = "v0.1.0-dev"

// NewCommand returns `nodepool controller`.
func NewCommand() *cobra.Command {
	var (
		s                    Settings
		caFile, mgmtConfig   string
		metricsAddr, probe   string
		pprofAddr            string
		leaderElect          bool
		leaderElectNamespace string
		leaseDuration        time.Duration
		renewDeadline        time.Duration
		retryPeriod          time.Duration
		concurrency          int
		qps                  float64
		burst                int
		namespaces           []string
		namespaceSelector    string
		zapOpts              = zap.Options{}
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the NodePool controller",
		Long: `Run the NodePool controller: for each NodePool it renders the payload,
decides with the rollout engine whether machines roll (only on owner intent),
and manages the pool's Cluster API MachineDeployment, infrastructure template
clone, user-data, token and payload Secrets, conditions and events.

Workload cluster Nodes are read through Cluster API's ClusterCache and the
<cluster>-kubeconfig Secret.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			ctrllog.SetLogger(log)
			klog.SetLogger(log)
			if caFile == "" {
				return fmt.Errorf("--payload-server-ca is required: the PEM file of the CA that signs the payload server's certificate")
			}
			ca, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("reading --payload-server-ca: %w", err)
			}
			s.Inputs.PayloadServerCA = ca
			s.Inputs.RendererVersion = Version
			if mgmtConfig != "" {
				ns, name, ok := cutNamespacedName(mgmtConfig)
				if !ok {
					return fmt.Errorf("--management-config %q must be <namespace>/<name>", mgmtConfig)
				}
				s.Inputs.ManagementConfig = types.NamespacedName{Namespace: ns, Name: name}
			}
			s.Default()
			if err := s.Validate(); err != nil {
				return err
			}
			if leaderElect && !(retryPeriod > 0 && retryPeriod < renewDeadline && renewDeadline < leaseDuration) {
				return fmt.Errorf("leader election needs 0 < --leader-election-retry-period (%s) < --leader-election-renew-deadline (%s) < --leader-election-lease-duration (%s)",
					retryPeriod, renewDeadline, leaseDuration)
			}
			cfg, err := config.GetConfig()
			if err != nil {
				return fmt.Errorf("reaching the API server: %w", err)
			}
			cfg.QPS, cfg.Burst = float32(qps), burst
			scheme := runtime.NewScheme()
			if err := AddToScheme(scheme); err != nil {
				return err
			}
			if namespaceSelector != "" {
				if len(namespaces) > 0 {
					return fmt.Errorf("--namespaces and --namespace-selector both select the shard's namespaces: give one")
				}
				c, err := client.New(cfg, client.Options{Scheme: scheme})
				if err != nil {
					return err
				}
				if namespaces, err = SelectNamespaces(cmd.Context(), c, namespaceSelector); err != nil {
					return err
				}
			}
			s.Shard.Namespaces = namespaces
			if err := s.Shard.Validate(); err != nil {
				return err
			}
			if s.Shard.Name != "" {
				cfg.UserAgent = s.Shard.FieldManager() + "/" + Version // the field manager of its writes
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                  scheme,
				Cache:                   s.Shard.CacheOptions(CacheOptions(), s.Inputs.ManagementConfig, s.MirrorNamespace),
				Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
				HealthProbeBindAddress:  probe,
				PprofBindAddress:        pprofAddr,
				LeaderElection:          leaderElect,
				LeaderElectionID:        s.Shard.LeaderElectionID(),
				LeaderElectionNamespace: leaderElectNamespace,
				LeaseDuration:           &leaseDuration,
				RenewDeadline:           &renewDeadline,
				RetryPeriod:             &retryPeriod,
				// A replica that stops (SIGTERM, a rolling update) hands the
				// lease over at once instead of making the next one wait for
				// it to expire; the process ends right after the manager.
				LeaderElectionReleaseOnCancel: true,
			})
			if err != nil {
				return fmt.Errorf("creating the manager: %w", err)
			}
			if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := Setup(ctx, mgr, s, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
				return err
			}
			return mgr.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Inputs.PayloadServerURL, "payload-server-url", "", "https URL of the payload server's /ignition, as machines reach it (required)")
	f.StringVar(&caFile, "payload-server-ca", "", "PEM file of the CA that signs the payload server's certificate (required)")
	f.StringVar(&mgmtConfig, "management-config", inputs.DefaultManagementConfig.String(), "the management config ConfigMap, <namespace>/<name>")
	f.DurationVar(&s.TokenTTL, "token-ttl", 4*time.Hour, "how long a machine token is valid; it rotates at half of it")
	f.DurationVar(&s.CleanupGracePeriod, "cleanup-grace-period", 10*time.Minute, "how long an unreferenced user-data, token or payload Secret is kept")
	f.DurationVar(&s.ResyncPeriod, "resync-period", 5*time.Minute, "how often a settled pool is reconciled anyway")
	f.DurationVar(&s.NodeAgentTimeout, "node-agent-timeout", 30*time.Minute, "how long an InPlace node's agent may take to finish an update before the pool's update holds as Degraded")
	f.IntVar(&s.HistoryLimit, "history-limit", 10, "finished rollout records (ControllerRevisions) kept for a pool whose spec.management.revisionHistoryLimit is unset")
	f.StringVar(&s.NodeUpdateNamespace, "node-update-namespace", DefaultNodeUpdateNamespace, "namespace of each workload cluster where InPlace pools' node agents read the Secret to fetch their update with")
	f.IntVar(&concurrency, "concurrency", 10, "pools reconciled in parallel")
	f.Float64Var(&qps, "kube-api-qps", 200, "requests per second to the API server, sustained (a management bump patches every pool's status once)")
	f.IntVar(&burst, "kube-api-burst", 400, "requests to the API server in a burst")
	f.IntVar(&s.RenderCacheSize, "render-cache-size", 20000, "pools whose rendered inputs are kept; at least the pools of the shard")
	f.StringVar(&s.MirrorNamespace, "mirror-namespace", "", "write a mirror of each pool's token Secrets and of the payload Secrets they point to into this namespace (the controller's own), for a payload server started with the same --mirror-namespace, which then reads Secrets there only; empty: no mirrors")
	f.StringVar(&s.Shard.Name, "shard", "", "name of this shard: its leader election Lease and field manager (nodepool-controller-<shard>); required with --namespaces or --namespace-selector")
	f.StringSliceVar(&namespaces, "namespaces", nil, "namespaces whose pools this controller owns (a shard); default all")
	f.BoolVar(&s.Shard.FleetRollouts, "fleet-rollouts", false, "with --shard: this shard runs every FleetRollout, triggering the pools of every shard (each pool's own shard carries it out); give it to one shard only. The unsharded controller always runs them")
	f.StringVar(&namespaceSelector, "namespace-selector", "", "label selector of the namespaces whose pools this controller owns, read at start (a shard)")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	f.StringVar(&probe, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	f.StringVar(&pprofAddr, "pprof-bind-address", "", "address of the Go profiler's /debug/pprof endpoints; empty disables them")
	f.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so replicas can run for availability")
	f.StringVar(&s.PublishNamespace, "settings-namespace", settings.DefaultNamespace, "namespace of the ConfigMap "+settings.ConfigMapName+" where the controller publishes the settings kubectl nodepool plan, diff and rollout status read")
	f.StringVar(&leaderElectNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's)")
	f.DurationVar(&leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long replicas wait, after the leader last renewed its lease, before one takes over")
	f.DurationVar(&renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew its lease before it stops leading (and exits)")
	f.DurationVar(&retryPeriod, "leader-election-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
	fs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(fs)
	f.AddGoFlagSet(fs)
	return cmd
}

func cutNamespacedName(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}
