package controller

import (
	"context"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	nodepoolv1 "nodepool.dev/nodepool/api/v1alpha1"
	"nodepool.dev/nodepool/internal/capi"
	"nodepool.dev/nodepool/internal/secrets"
)

// AddToScheme registers what the controller reads and writes.
func AddToScheme(s *runtime.Scheme) error {
	if err := capi.AddToScheme(s); err != nil {
		return err
	}
	return nodepoolv1.AddToScheme(s)
}

// CacheOptions keeps the manager's cache small: no object keeps its
// managedFields; Cluster API's Clusters, MachineDeployments, MachineSets
// and Machines are cached without their status.deprecated (the v1beta1
// conditions and counters Cluster API still writes, which nothing here
// reads); Secrets are cached with their data only when they belong
// to a pool, payload Secrets with their manifest only (the payload memo
// reads one whole when it needs its fragments), ConfigMaps by their
// metadata only; the content of other
// Secrets (pull secrets) and of ConfigMaps is read uncached through
// APIReader when their resourceVersion changes (inputReader).
func CacheOptions() ctrlcache.Options {
	return ctrlcache.Options{
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
		ByObject: map[client.Object]ctrlcache.ByObject{
			&clusterv1.Cluster{}:           {Transform: stripCAPIDeprecated},
			&clusterv1.MachineDeployment{}: {Transform: stripCAPIDeprecated},
			&clusterv1.MachineSet{}:        {Transform: stripCAPIDeprecated},
			&clusterv1.Machine{}:           {Transform: stripCAPIDeprecated},
			&corev1.Secret{}: {Transform: func(in any) (any, error) {
				if s, ok := in.(*corev1.Secret); ok {
					s.SetManagedFields(nil)
					// A token mirror is compared with what the pool's token
					// holds (mirror.go); a payload mirror by its hash.
					if _, owned := s.Labels[nodepoolv1.LabelPool]; !owned && secrets.KindOf(s) != secrets.KindTokenMirror {
						s.Data, s.StringData = nil, nil
					}
					secrets.StripPayload(s)
				}
				return in, nil
			}},
		},
	}
}

// stripCAPIDeprecated drops an object's managedFields and, of Cluster
// API's kinds, status.deprecated: a cache transform.
func stripCAPIDeprecated(in any) (any, error) {
	if o, ok := in.(client.Object); ok {
		o.SetManagedFields(nil)
	}
	switch o := in.(type) {
	case *clusterv1.Cluster:
		o.Status.Deprecated = nil
	case *clusterv1.MachineDeployment:
		o.Status.Deprecated = nil
	case *clusterv1.MachineSet:
		o.Status.Deprecated = nil
	case *clusterv1.Machine:
		o.Status.Deprecated = nil
	}
	return in, nil
}

// Setup adds the NodePool controller, with its own Cluster API ClusterCache
// to reach workload clusters, to a manager built with CacheOptions.
func Setup(ctx context.Context, mgr ctrl.Manager, settings Settings, opts controller.Options) error {
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetAPIReader(),
		Cache: clustercache.CacheOptions{
			Indexes: []clustercache.CacheOptionsIndex{clustercache.NodeProviderIDIndex},
		},
		Client: clustercache.ClientOptions{
			UserAgent: "nodepool-controller",
			QPS:       20,
			Burst:     40,
			Cache: clustercache.ClientCacheOptions{
				DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Pod{}},
			},
		},
	}, opts)
	if err != nil {
		return fmt.Errorf("setting up the ClusterCache: %w", err)
	}
	if err := indexLabels(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing the pools' objects: %w", err)
	}
	r := &Reconciler{
		// Every write carries the shard's field manager: managedFields
		// tell nodepool's writes from others' (external.go).
		Client:       indexedClient{client.WithFieldOwner(mgr.GetClient(), settings.Shard.FieldManager())},
		APIReader:    mgr.GetAPIReader(),
		Cache:        mgr.GetCache(),
		ClusterCache: cc,
		Recorder:     mgr.GetEventRecorder(settings.Shard.FieldManager()),
		Settings:     settings,
		Clock:        settings.Clock,
	}
	settings.Default()
	reader := newInputReader(mgr.GetClient(), mgr.GetCache(), mgr.GetAPIReader(), 1024)
	r.payloads = newPayloadMemo(2*settings.RenderCacheSize, mgr.GetAPIReader())
	r.refusals = newLRU[string, bool](4096)
	r.announcements = newLRU[string, bool](4096)
	if r.renders, err = newRenderCache(reader, settings.Inputs, settings.RenderCacheSize); err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := setupFleetRollouts(mgr, r.Settings, opts); err != nil {
		return err
	}
	if r.Settings.Shard.RunsFleetRollouts() {
		// One event per platform bump, from the unsharded controller or
		// the one shard given --fleet-rollouts (platform_events.go).
		if err := mgr.Add(platformEvents(mgr, r)); err != nil {
			return err
		}
	}
	if r.Settings.MirrorNamespace != "" {
		if err := mgr.Add(r.mirrorSweeper()); err != nil {
			return err
		}
	}
	return publishSettings(mgr, r.Settings)
}

// setupFleetRollouts adds the FleetRollout controller and the fleet
// metrics. FleetRollouts are cluster-scoped and span namespaces: the
// unsharded controller runs them, or the one shard started with
// --fleet-rollouts. That shard reads every namespace's pools and history
// records through a cache of its own (fleetCluster) and triggers the
// pools of every shard through their annotations, as the unsharded
// controller does; each pool's own shard carries the trigger out.
func setupFleetRollouts(mgr ctrl.Manager, settings Settings, opts controller.Options) error {
	if !settings.Shard.RunsFleetRollouts() {
		registerFleetMetrics(mgr.GetClient(), settings.Clock)
		return nil
	}
	fr := &FleetRolloutReconciler{
		Client:    indexedClient{mgr.GetClient()},
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(settings.Shard.FieldManager()),
		Clock:     settings.Clock,
		Resync:    settings.ResyncPeriod,
	}
	if len(settings.Shard.Namespaces) > 0 {
		cl, err := fleetCluster(mgr)
		if err != nil {
			return err
		}
		if err := indexRevisions(context.Background(), cl.GetFieldIndexer()); err != nil {
			return fmt.Errorf("indexing the pools' history: %w", err)
		}
		fr.Client, fr.Cache = indexedClient{cl.GetClient()}, cl.GetCache()
		if err := indexFleetMembers(context.Background(), cl.GetFieldIndexer()); err != nil {
			return fmt.Errorf("indexing the fleet rollouts' members: %w", err)
		}
	} else if err := indexFleetMembers(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("indexing the fleet rollouts' members: %w", err)
	}
	fr.MembersIndexed = true
	registerFleetMetrics(fr.Client, settings.Clock)
	return fr.SetupWithManager(mgr, opts)
}

// fleetCluster is a cache of every namespace for a shard's FleetRollout
// controller: FleetRollouts, NodePools (without managedFields) and the
// pools' history records. Its client writes as the manager's does.
func fleetCluster(mgr ctrl.Manager) (cluster.Cluster, error) {
	pools, err := labels.NewRequirement(nodepoolv1.LabelPool, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	cl, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
		o.Cache = ctrlcache.Options{
			DefaultTransform: ctrlcache.TransformStripManagedFields(),
			ByObject: map[client.Object]ctrlcache.ByObject{
				&appsv1.ControllerRevision{}: {Label: labels.NewSelector().Add(*pools)},
			},
		}
	})
	if err != nil {
		return nil, fmt.Errorf("creating the fleet rollouts' cache of every namespace: %w", err)
	}
	if err := mgr.Add(cl); err != nil {
		return nil, err
	}
	return cl, nil
}
