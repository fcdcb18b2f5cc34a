package capi

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	clusterreconciler "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	machinereconciler "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	mdreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	mhcreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	msreconciler "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/util/index"
)

// Options tunes the in-process Cluster API controllers.
type Options struct {
	// Scheme must hold client-go and Cluster API core v1beta2 types; nil
	// builds one with AddToScheme.
	Scheme *runtime.Scheme
	// SyncPeriod of the manager's cache; 0 means 10 minutes.
	SyncPeriod time.Duration
	// Concurrency of each reconciler; 0 means 4.
	Concurrency int
	// MetricsBindAddress of the manager; empty means off ("0").
	MetricsBindAddress string
}

// AddToScheme adds what the Cluster API core controllers read and write.
func AddToScheme(s *runtime.Scheme) error {
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return err
	}
	return clusterv1.AddToScheme(s)
}

// managerCount makes informer names unique: Cluster API names informers
// after the controller and panics when a name is used twice in a process.
var managerCount atomic.Int32

// DisableRateLimiting turns off Cluster API's per-object reconcile rate
// limiting, which otherwise makes a rollout of three machines take about
// 25s instead of 2.5s. It is process-global; call it before NewManager.
func DisableRateLimiting() error {
	return feature.MutableGates.Set(fmt.Sprintf("%s=false", feature.ReconcilerRateLimiting))
}

// NewManager returns a manager running the Cluster API core controllers
// (Cluster, Machine, MachineSet, MachineDeployment, MachineHealthCheck) and
// the ClusterCache, wired as Cluster API's own main does. Start it with mgr.Start.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (manager.Manager, error) {
	scheme := opts.Scheme
	if scheme == nil {
		scheme = runtime.NewScheme()
		if err := AddToScheme(scheme); err != nil {
			return nil, err
		}
	}
	if opts.SyncPeriod == 0 {
		opts.SyncPeriod = 10 * time.Minute
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = 4
	}
	if opts.MetricsBindAddress == "" {
		opts.MetricsBindAddress = "0"
	}
	name := fmt.Sprintf("capi-%d", managerCount.Add(1))
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  setup.ManagerCacheOptions(scheme, name, "", opts.SyncPeriod),
		Client:                 setup.ManagerClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the Cluster API manager: %w", err)
	}
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("adding Cluster API indexes: %w", err)
	}
	secretClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("creating the secret caching client: %w", err)
	}
	ctrlOpts := controller.Options{MaxConcurrentReconciles: opts.Concurrency}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(name, 50, 100),
	}, ctrlOpts)
	if err != nil {
		return nil, fmt.Errorf("setting up the ClusterCache: %w", err)
	}
	apiReader := mgr.GetAPIReader()
	c := mgr.GetClient()
	if err := (&clusterreconciler.Reconciler{
		Client: c, APIReader: apiReader, ClusterCache: clusterCache,
		RemoteConnectionGracePeriod: 50 * time.Second,
	}).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return nil, fmt.Errorf("setting up the Cluster reconciler: %w", err)
	}
	if err := (&machinereconciler.Reconciler{
		Client: c, APIReader: apiReader, ClusterCache: clusterCache,
		RemoteConditionsGracePeriod: 5 * time.Minute,
	}).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return nil, fmt.Errorf("setting up the Machine reconciler: %w", err)
	}
	if err := (&msreconciler.Reconciler{
		Client: c, APIReader: apiReader, ClusterCache: clusterCache,
	}).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return nil, fmt.Errorf("setting up the MachineSet reconciler: %w", err)
	}
	if err := (&mdreconciler.Reconciler{
		Client: c, APIReader: apiReader,
	}).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return nil, fmt.Errorf("setting up the MachineDeployment reconciler: %w", err)
	}
	if err := (&mhcreconciler.Reconciler{
		Client: c, ClusterCache: clusterCache,
	}).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return nil, fmt.Errorf("setting up the MachineHealthCheck reconciler: %w", err)
	}
	return mgr, nil
}
