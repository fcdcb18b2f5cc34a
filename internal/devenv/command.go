package devenv

import (
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"nodepool.dev/nodepool/internal/payloadserver"
	"nodepool.dev/nodepool/internal/sim"
)

// Defaults of `nodepool dev up`: faster than production, so a rollout can
// be watched in a minute.
const (
	DefaultDataDir           = ".dev"
	DefaultAPIServerPort     = 16443
	DefaultEtcdPort          = 12379
	DefaultEtcdPeerPort      = 12380
	DefaultPayloadServerPort = 18443
	DefaultBootDelay         = 2 * time.Second
	DefaultUpdateDelay       = 2 * time.Second
)

// NewCommand returns `nodepool dev` with its subcommands up and demo.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "A development environment on this machine, and a guided demo",
		Long: `A development environment on this machine, and a guided demo.

  nodepool dev up     etcd, kube-apiserver, Cluster API, nodepool and the sim
                      provider in one process; a Cluster ready for NodePools
  nodepool dev demo   a narrated scenario played against it`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newUpCommand(), newDemoCommand())
	return cmd
}

func newUpCommand() *cobra.Command {
	o := UpOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run etcd, kube-apiserver, Cluster API, nodepool and the sim provider on this machine",
		Long: `Run a complete nodepool environment on this machine: etcd and
kube-apiserver as child processes (built from source into bin/k8s on first
use, about 15 minutes on 2 cores), and in this process the Cluster API core
controllers, the NodePool controller, the payload server (HTTPS, with a CA
generated into the data dir) and the sim provider, whose machines really
fetch their payload and register Nodes.

It makes namespace "dev" with a Cluster "dev" (a SimControlPlane and its
kubeconfig Secret) and a SimMachineTemplate "small", and the management
config nodepool-system/management-config; then prints "ready ..." and a line
per pool whenever a pool changes. Logs go to <data-dir>/nodepool.log (etcd and
kube-apiserver log beside it), the admin kubeconfig to <data-dir>/kubeconfig.

Ctrl-C stops everything cleanly; running it again with the same --data-dir
resumes where it stopped. There is no kube-controller-manager: owner
references do not cascade and namespaces are never finalised.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				// A second Ctrl-C ends the process at once.
				stop()
			}()
			o.PayloadServer.MirrorNamespace = o.Controller.MirrorNamespace
			return Up(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DataDir, "data-dir", DefaultDataDir, "keeps etcd's data, certificates, kubeconfig and logs; the same dir resumes")
	f.StringVar(&o.AssetsDir, "assets-dir", "", "folder with kube-apiserver and etcd (default: bin/k8s/<versions>, built when missing; or $NODEPOOL_ASSETS)")
	f.IntVar(&o.APIServerPort, "apiserver-port", DefaultAPIServerPort, "kube-apiserver's HTTPS port on 127.0.0.1")
	f.IntVar(&o.EtcdPort, "etcd-port", DefaultEtcdPort, "etcd's client port on 127.0.0.1")
	f.IntVar(&o.EtcdPeerPort, "etcd-peer-port", DefaultEtcdPeerPort, "etcd's peer port on 127.0.0.1")
	f.IntVar(&o.PayloadServerPort, "payload-server-port", DefaultPayloadServerPort, "the payload server's HTTPS port on 127.0.0.1 (part of every payload: keep it across restarts)")

	f.StringVar(&o.Controller.MirrorNamespace, "mirror-namespace", "", "controller and payload server: mirror the pools' token and payload Secrets into this namespace and serve those only, as the shipped install does with nodepool-system (default: the payload server reads the pools' own Secrets)")
	f.DurationVar(&o.Controller.TokenTTL, "token-ttl", time.Hour, "controller: how long a machine token is valid; it rotates at half of it (production: 4h)")
	f.DurationVar(&o.Controller.CleanupGracePeriod, "cleanup-grace-period", 30*time.Second, "controller: how long an unreferenced user-data, token or payload Secret is kept (production: 10m)")
	f.DurationVar(&o.Controller.ResyncPeriod, "resync-period", 30*time.Second, "controller: how often a settled pool is reconciled anyway (production: 5m)")
	f.IntVar(&o.Controller.HistoryLimit, "history-limit", 10, "controller: finished rollout records (ControllerRevisions) kept for a pool whose spec.management.revisionHistoryLimit is unset")
	f.IntVar(&o.ControllerConcurrency, "concurrency", 4, "controller: pools reconciled in parallel")
	f.StringVar(&o.ControllerMetricsAddress, "metrics-bind-address", "0", `controller: address of the Prometheus metrics endpoint, such as 127.0.0.1:8080 ("0" disables it)`)

	f.StringVar(&o.PayloadServer.ProbeAddress, "payload-server-probe-bind-address", "0", `payload server: plain-HTTP /healthz, /readyz and /metrics, such as 127.0.0.1:8081 ("0" disables it)`)
	f.DurationVar(&o.PayloadServer.ReadHeaderTimeout, "payload-server-read-header-timeout", payloadserver.DefaultReadHeaderTimeout, "payload server: time a client has to send the request headers")
	f.DurationVar(&o.PayloadServer.ReadTimeout, "payload-server-read-timeout", payloadserver.DefaultReadTimeout, "payload server: time a client has to send the whole request")
	f.DurationVar(&o.PayloadServer.WriteTimeout, "payload-server-write-timeout", payloadserver.DefaultWriteTimeout, "payload server: time to write a response")
	f.DurationVar(&o.PayloadServer.IdleTimeout, "payload-server-idle-timeout", payloadserver.DefaultIdleTimeout, "payload server: time an idle keep-alive connection stays open")
	f.IntVar(&o.PayloadServer.MaxHeaderBytes, "payload-server-max-header-bytes", payloadserver.DefaultMaxHeaderBytes, "payload server: largest request header accepted")

	f.DurationVar(&o.Sim.BootDelay, "boot-delay", DefaultBootDelay, "sim: power-on time of a machine before it fetches its payload (a SimMachineTemplate's spec.bootDelay wins)")
	f.DurationVar(&o.Sim.UpdateDelay, "update-delay", DefaultUpdateDelay, "sim: time a machine's node agent takes to apply an in-place update, from reporting Working (a SimMachineTemplate's spec.updateDelay wins)")
	f.DurationVar(&o.Sim.FetchTimeout, "fetch-timeout", sim.DefaultFetchTimeout, "sim: time limit of one payload request")
	f.DurationVar(&o.Sim.InitialRetryDelay, "initial-retry-delay", sim.DefaultInitialRetryDelay, "sim: first delay before a failed payload fetch is retried (doubles each time)")
	f.DurationVar(&o.Sim.MaxRetryDelay, "max-retry-delay", sim.DefaultMaxRetryDelay, "sim: longest delay between payload fetch retries")
	f.IntVar(&o.Sim.Concurrency, "sim-concurrency", sim.DefaultConcurrency, "sim: machines booted at once")
	f.StringVar(&o.Sim.ClusterViewsAddress, "cluster-views-address", "127.0.0.1:0", `sim: address where each Cluster's kubeconfig reaches its own view of the API server, its own Nodes only ("" : every Cluster sees every Node)`)

	f.IntVar(&o.CAPIConcurrency, "capi-concurrency", 4, "Cluster API: concurrency of each core reconciler")
	f.StringVar(&o.APIServerProxyImage, "apiserver-proxy-image", DefaultAPIServerProxyImage, "management config: the API-server proxy image, written when the config is created")
	f.DurationVar(&o.StatusInterval, "status-interval", 2*time.Second, "how often the terminal status looks at the pools")

	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Log.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	return cmd
}

func newDemoCommand() *cobra.Command {
	o := DemoOptions{}
	var dataDir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a narrated scenario against a running `nodepool dev up`",
		Long: `Play a narrated scenario against a running ` + "`nodepool dev up`" + `:

  1. create a NodePool of 3 (with a ConfigMap holding an Ignition fragment)
  2. the platform bumps the API-server proxy image: nothing is replaced, the
     drift is named on the pool
  3. scale to 5: the new nodes boot what the running nodes run
  4. the owner changes the config: a rolling replacement, shown live
  5. force a restart with spec.management.rolloutAfter = now
  6. the rollout history (ControllerRevisions)

A NodePool of the same name from an earlier run is deleted first. Between
steps it waits for Enter when run in a terminal, unless --yes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Kubeconfig == "" {
				o.Kubeconfig = defaultKubeconfig(dataDir)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Demo(ctx, o, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", DefaultDataDir, "the data dir of `nodepool dev up`, whose kubeconfig the demo uses")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the dev environment (default: <data-dir>/kubeconfig)")
	f.StringVar(&o.Namespace, "namespace", devNamespace, "namespace of the Cluster and the pool")
	f.StringVar(&o.Cluster, "cluster", devCluster, "the Cluster API Cluster the pool joins")
	f.StringVar(&o.Template, "template", devTemplate, "the SimMachineTemplate of the pool's machines")
	f.StringVar(&o.Pool, "pool", "demo", "name of the demo's NodePool (an earlier one of that name is deleted)")
	f.BoolVarP(&o.Yes, "yes", "y", false, "play every step without waiting for Enter")
	f.DurationVar(&o.Hold, "hold", 10*time.Second, "how long to watch that platform drift replaces no machine")
	f.DurationVar(&o.StepTimeout, "step-timeout", 5*time.Minute, "how long one step may take")
	return cmd
}
