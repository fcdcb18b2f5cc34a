package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	simv1 "nodepool.dev/nodepool/internal/sim/api/v1alpha1"
)

// DefaultConcurrency is how many machines (and control planes) are
// reconciled at once.
const DefaultConcurrency = 10

// Options configure the sim provider. The zero value works.
type Options struct {
	// WorkloadConfig is the API server the <cluster>-kubeconfig Secrets of
	// SimControlPlanes point at, where the simulated Nodes live: the node
	// agent watches Nodes and reads update Secrets there. Nil means the
	// manager's own configuration (the same API server).
	WorkloadConfig *rest.Config
	// ClusterViewsAddress, when set, is the address (host:port; port 0
	// picks one) where the sim serves each Cluster its own view of the
	// workload API server, as each Cluster of a real fleet is its own
	// API server: a Cluster's kubeconfig Secret then points at its path
	// there, where Node lists and watches hold its own Nodes only and
	// another Cluster's Node is not found (cluster_view.go). Every client
	// of the kubeconfig Secrets must reach that address (HTTPS with the
	// sim's own CA, a token per Cluster; the sim forwards with
	// WorkloadConfig's credentials; an address of every interface is
	// written as 127.0.0.1). Empty: the kubeconfig Secrets point at
	// WorkloadConfig itself, and every Cluster sees every Node.
	ClusterViewsAddress string
	// Workload gives clients of workload clusters to register Nodes with.
	// Nil means clients built from the <cluster>-kubeconfig Secrets, as a
	// real provider does; Cluster API's clustercache.ClusterCache fits too.
	Workload WorkloadClusters
	// BootDelay is the power-on time of a machine that sets none (spec.bootDelay
	// or annotation sim.nodepool.dev/boot-delay). Default 0.
	BootDelay time.Duration
	// UpdateDelay is how long the node agent of a machine that sets none
	// (spec.updateDelay or annotation sim.nodepool.dev/update-delay) takes
	// to apply an in-place update, from reporting Working. Default 0.
	UpdateDelay time.Duration
	// FetchTimeout bounds one payload request (DefaultFetchTimeout).
	FetchTimeout time.Duration
	// DialPayloadServer opens the connections of payload fetches; nil dials
	// the URL's host as it is. A test stands in with it for what a machine
	// has and a test host lacks: cluster DNS and a Service in front of the
	// payload server's replicas.
	DialPayloadServer func(ctx context.Context, network, address string) (net.Conn, error)
	// InitialRetryDelay and MaxRetryDelay shape the backoff of payload
	// fetches (DefaultInitialRetryDelay, DefaultMaxRetryDelay: Ignition's).
	InitialRetryDelay, MaxRetryDelay time.Duration
	// Concurrency of each controller (DefaultConcurrency).
	Concurrency int
}

func (o Options) withDefaults(mgr ctrl.Manager) Options {
	if o.WorkloadConfig == nil {
		o.WorkloadConfig = rest.CopyConfig(mgr.GetConfig())
	}
	if o.Workload == nil {
		o.Workload = NewKubeconfigClusters(mgr.GetClient())
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.InitialRetryDelay == 0 {
		o.InitialRetryDelay = DefaultInitialRetryDelay
	}
	if o.MaxRetryDelay == 0 {
		o.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.BootDelay < 0 {
		errs = append(errs, fmt.Errorf("boot delay %s is negative", o.BootDelay))
	}
	if o.UpdateDelay < 0 {
		errs = append(errs, fmt.Errorf("update delay %s is negative", o.UpdateDelay))
	}
	if o.FetchTimeout < 0 || o.InitialRetryDelay < 0 || o.MaxRetryDelay < 0 || o.Concurrency < 0 {
		errs = append(errs, errors.New("fetch timeout, retry delays and concurrency cannot be negative"))
	}
	if o.MaxRetryDelay < o.InitialRetryDelay {
		errs = append(errs, fmt.Errorf("the maximum retry delay %s is below the initial one %s", o.MaxRetryDelay, o.InitialRetryDelay))
	}
	return errors.Join(errs...)
}

// AddToScheme adds what the sim provider reads and writes: client-go,
// Cluster API core v1beta2 and the sim types.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, simv1.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// CacheOptions narrow a manager's cache to what the provider needs of
// Secrets: bootstrap data and kubeconfig Secrets (type
// cluster.x-k8s.io/secret). Optional: without them every Secret is cached.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(clusterv1.ClusterSecretType))},
	}}
}

// SetupWithManager adds the SimMachine, node agent and SimControlPlane
// controllers to mgr, and a client of the workload cluster
// (Options.WorkloadConfig) whose cache holds its Nodes; mgr's scheme must
// hold AddToScheme's types. Several sims may share a process (controller
// names are not checked).
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	opts = opts.withDefaults(mgr)
	if err := opts.validate(); err != nil {
		return fmt.Errorf("sim provider options: %w", err)
	}
	if !mgr.GetScheme().Recognizes(simv1.GroupVersion.WithKind(simv1.KindSimMachine)) || !mgr.GetScheme().Recognizes(clusterv1.GroupVersion.WithKind("Machine")) {
		return errors.New("sim provider: the manager's scheme lacks the sim or Cluster API types: register sim.AddToScheme")
	}
	machines := &machineReconciler{
		client:    mgr.GetClient(),
		reader:    mgr.GetAPIReader(),
		workload:  opts.Workload,
		recorder:  mgr.GetEventRecorder("sim-machine"),
		fetcher:   newFetcher(opts.FetchTimeout, opts.DialPayloadServer),
		backoff:   newBackoff(opts.InitialRetryDelay, opts.MaxRetryDelay),
		bootDelay: opts.BootDelay,
		now:       time.Now,
	}
	if err := machines.setupWithManager(ctx, mgr, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the SimMachine controller: %w", err)
	}
	workload, err := newWorkloadCluster(opts.WorkloadConfig, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("connecting the node agent to the workload cluster: %w", err)
	}
	if err := mgr.Add(workload); err != nil {
		return fmt.Errorf("adding the workload cluster of the node agent to the manager: %w", err)
	}
	agent := &agentReconciler{
		client:   mgr.GetClient(),
		nodes:    workload.GetClient(),
		secrets:  workload.GetAPIReader(),
		recorder: mgr.GetEventRecorder("sim-agent"),
		fetcher:  machines.fetcher,
		backoff:  newBackoff(opts.InitialRetryDelay, opts.MaxRetryDelay),
		defaults: knobs{updateDelay: opts.UpdateDelay},
		now:      time.Now,
		retries:  map[types.UID]pendingRetry{},
	}
	if err := agent.setupWithManager(mgr, workload, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the node agent controller: %w", err)
	}
	placer := &workloadPlacer{client: mgr.GetClient(), nodes: workload.GetClient(), workload: opts.Workload}
	if err := placer.setupWithManager(mgr, workload, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the workload pods controller: %w", err)
	}
	kubelet := &kubeletReconciler{cache: workload.GetClient(), client: workload.GetClient(), now: time.Now}
	if err := kubelet.setupWithManager(ctx, mgr, workload, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the kubelet of the sim's Nodes: %w", err)
	}
	disruption := &disruptionReconciler{cache: workload.GetClient(), client: workload.GetClient(), now: time.Now}
	if err := disruption.setupWithManager(mgr, workload, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the disruption budgets of the workload cluster: %w", err)
	}
	workloadConfig := func(client.ObjectKey) *rest.Config { return opts.WorkloadConfig }
	if opts.ClusterViewsAddress != "" {
		views, err := newClusterViews(opts.ClusterViewsAddress, opts.WorkloadConfig, workload.GetClient())
		if err != nil {
			return err
		}
		if err := mgr.Add(views); err != nil {
			return fmt.Errorf("adding the Clusters' views of the workload API server to the manager: %w", err)
		}
		workloadConfig = views.configFor
	}
	controlPlanes := &controlPlaneReconciler{
		client:   mgr.GetClient(),
		config:   workloadConfig,
		recorder: mgr.GetEventRecorder("sim-control-plane"),
	}
	if err := controlPlanes.setupWithManager(mgr, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the SimControlPlane controller: %w", err)
	}
	if err := (&clusterReconciler{client: mgr.GetClient()}).setupWithManager(mgr, opts.Concurrency); err != nil {
		return fmt.Errorf("setting up the SimCluster controller: %w", err)
	}
	return nil
}
