package payloadserver

import (
	"flag"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// NewCommand returns the `nodepool payload-server` command.
func NewCommand() *cobra.Command {
	var (
		opts       Options
		kubeconfig string
		zapOpts    = zap.Options{}
	)
	cmd := &cobra.Command{
		Use:   "payload-server",
		Short: "Serve each pool's pinned payload over HTTPS to machines that present its token",
		Long: `Serve each pool's pinned payload over HTTPS to machines that present its token.

GET /ignition with "Authorization: Bearer <token>" returns the Ignition config
that the token Secret holding <token> (as its current or previous token)
points to: the payload Secret of the same pool in the same namespace. The
scheme is case-insensitive ("bearer" works, RFC 9110). Any other token, or
none, gets 511 Network Authentication Required with a fixed
body, and Ignition retries. Answers come from an in-memory index of the
token and payload Secrets (label nodepool.dev/secret-kind), kept current by
a watch; a request never reaches the API server.

The HTTPS listener (--bind-address) serves /ignition only, TLS 1.2 or newer,
with the certificate and key in --tls-cert-file and --tls-private-key-file,
re-read when they change (a cert-manager Secret mount works). Probes and
metrics are on a separate plain-HTTP listener (--probe-bind-address), the
Kubernetes convention: /healthz, /readyz (ready once every Secret is
indexed) and /metrics (Prometheus). Keep that port inside the cluster.

A payload is served only if it provably came from the controller: its
Ignition config is the composition of the fragments it stores, they hash to
the payload hash the token Secret points to, and it is controlled by the
same NodePool (owner UID) as the token Secret. Anything else is ignored,
counted in nodepool_payload_server_ignored_payloads_total{reason} and logged
once, without content. One payload inflates to at most --max-payload-bytes,
a pool has at most --max-payloads-per-pool indexed, the payloads of one
namespace hold at most --max-namespace-index-bytes (by default an equal
share of the total for each namespace served, an eighth of it when serving
every namespace), and all of them at most --max-index-bytes (gauge
nodepool_payload_server_index_bytes). A payload past a limit is refused
(reason pool_limit, namespace_full or index_full), kept in the Secret cache
without its data, and read again once a payload leaves and it fits.

A source (remote IP) failing token attempts faster than
--failed-attempts-per-second (after --failed-attempts-burst) gets its 511s
late, up to --max-failure-delay each; a request with a valid token is never
delayed. Slow or oversized request headers are cut by --read-header-timeout
and --max-header-bytes.

The first successful fetch with a token Secret's tokens is recorded on it
once, as the annotation nodepool.dev/first-fetch.

With --mirror-namespace (the shipped install) the server reads only the
mirrors the controller writes into that namespace, its own: a copy of each
pool's token Secrets and of the payload Secrets they point to, naming the
pool by labels and its UID by annotation, checked as the pools' own are
(content hash, names). It then needs list, watch and patch on Secrets in
that one namespace, and is ready once the controller has marked the
mirrors complete (Secret nodepool-mirrors-ready). Without it, it reads the
pools' own Secrets in --namespace and --namespaces, or in every namespace,
and needs list, watch and patch on Secrets there.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := zap.New(zap.UseFlagOptions(&zapOpts))
			ctrllog.SetLogger(log)
			klog.SetLogger(log)
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			opts.Config = cfg
			opts.Logger = log.WithName("payload-server")
			s, err := New(opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return s.Start(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Address, "bind-address", DefaultAddress, "address of the HTTPS listener serving /ignition")
	f.StringVar(&opts.ProbeAddress, "probe-bind-address", DefaultProbeAddress, `address of the plain-HTTP listener serving /healthz, /readyz and /metrics ("0" disables it)`)
	f.StringVar(&opts.CertFile, "tls-cert-file", "", "PEM serving certificate (chain), re-read when it changes (required)")
	f.StringVar(&opts.KeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file, re-read when it changes (required)")
	f.StringVar(&opts.Namespace, "namespace", "", "serve the pools of this namespace only (default: every namespace)")
	f.StringVar(&opts.MirrorNamespace, "mirror-namespace", "", "serve the mirrors the controller writes into this namespace (its --mirror-namespace) and read Secrets nowhere else; ready once the controller has mirrored every pool (exclusive with --namespace and --namespaces)")
	f.StringSliceVar(&opts.Namespaces, "namespaces", nil, "serve the pools of these namespaces only, comma-separated (with --namespace; default: every namespace)")
	f.IntVar(&opts.Limits.MaxPayloadBytes, "max-payload-bytes", DefaultMaxPayloadBytes, "largest Ignition config one payload Secret may inflate to; larger ones are not served")
	f.IntVar(&opts.Limits.MaxPayloadsPerPool, "max-payloads-per-pool", DefaultMaxPayloadsPerPool, "most payload Secrets indexed per pool")
	f.Int64Var(&opts.Limits.MaxBytes, "max-index-bytes", DefaultMaxIndexBytes, "most bytes all indexed payloads may hold (inflated and compressed)")
	f.Int64Var(&opts.Limits.MaxNamespaceBytes, "max-namespace-index-bytes", 0, fmt.Sprintf("most bytes the indexed payloads of one namespace may hold (default: --max-index-bytes divided by the number of namespaces served, or by %d when serving every namespace)", DefaultNamespaceShares))
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, in-cluster, then ~/.kube/config)")
	f.DurationVar(&opts.ReadHeaderTimeout, "read-header-timeout", DefaultReadHeaderTimeout, "time a client has to send the request headers")
	f.DurationVar(&opts.ReadTimeout, "read-timeout", DefaultReadTimeout, "time a client has to send the whole request")
	f.DurationVar(&opts.WriteTimeout, "write-timeout", DefaultWriteTimeout, "time to write a response, from the end of the request headers")
	f.DurationVar(&opts.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "time an idle keep-alive connection stays open")
	f.IntVar(&opts.MaxHeaderBytes, "max-header-bytes", DefaultMaxHeaderBytes, "largest request header accepted; larger ones get 431")
	f.Float64Var(&opts.Failures.PerSecond, "failed-attempts-per-second", DefaultFailuresPerSecond, "failed token attempts per second one source (remote IP) may make before its failures are answered late")
	f.IntVar(&opts.Failures.Burst, "failed-attempts-burst", DefaultFailureBurst, "failed token attempts one source may make at once before the rate applies")
	f.DurationVar(&opts.Failures.MaxDelay, "max-failure-delay", DefaultMaxFailureDelay, "longest delay of one failed token attempt")
	_ = cmd.MarkFlagRequired("tls-cert-file")
	_ = cmd.MarkFlagRequired("tls-private-key-file")
	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(gofs)
	f.AddGoFlagSet(gofs)
	return cmd
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := config.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("finding the API server: %w (set --kubeconfig)", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading --kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
