package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

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
// managedFields; Secrets are cached with their data only when they belong
// to a pool, payload Secrets with their manifest only (the payload memo
// reads one whole when it needs its fragments), ConfigMaps by their
// metadata only; the content of other
// Secrets (pull secrets) and of ConfigMaps is read uncached through
// APIReader when their resourceVersion changes (inputReader).
func CacheOptions() ctrlcache.Options {
	return ctrlcache.Options{
		DefaultTransform: ctrlcache.TransformStripManagedFields(),
		ByObject: map[client.Object]ctrlcache.ByObject{
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
		Client:       indexedClient{mgr.GetClient()},
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
	if r.renders, err = newRenderCache(reader, settings.Inputs, settings.RenderCacheSize); err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := setupFleetRollouts(mgr, r.Settings, opts); err != nil {
		return err
	}
	if r.Settings.Shard.Name == "" {
		// One event per platform bump, from the controller owning every
		// pool (platform_events.go).
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
// metrics. FleetRollouts are cluster-scoped and span namespaces: only the
// controller that owns every namespace (unsharded) runs them.
func setupFleetRollouts(mgr ctrl.Manager, settings Settings, opts controller.Options) error {
	registerFleetMetrics(mgr.GetClient(), settings.Clock)
	if settings.Shard.Name != "" {
		return nil
	}
	fr := &FleetRolloutReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder(settings.Shard.FieldManager()),
		Clock:     settings.Clock,
		Resync:    settings.ResyncPeriod,
	}
	return fr.SetupWithManager(mgr, opts)
}
